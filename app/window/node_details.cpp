#include "node_details.h"

#include "widgets/paint/palette.h"

#include <QObject>

namespace smol::app {

QString nodeDetailsHtml(const widgets::NodeState &n)
{
    const net::MemoryByCategory &m = n.memory;
    QString html = QObject::tr("<h2>%1</h2><p>node %2, %3 on %4, <b>%5</b>%6</p>")
               .arg(widgets::displayName(n).toHtmlEscaped())
               .arg(n.id)
               .arg(n.rank >= 0 ? QObject::tr("rank %1 (%2)").arg(n.rank).arg(n.role) : QObject::tr("not in the run"))
               .arg(n.host.toHtmlEscaped())
               .arg(widgets::runStateName(n.state))
               .arg(n.slowdown > 1 ? QObject::tr(", computes %1x slower").arg(n.slowdown) : QString());
    html += QObject::tr("<table><tr><td>parameters</td><td align=right>%1</td></tr>"
           "<tr><td>gradients</td><td align=right>%2</td></tr>"
           "<tr><td>optimizer state</td><td align=right>%3</td></tr>"
           "<tr><td>activations</td><td align=right>%4</td></tr>"
           "<tr><td>communication buffers</td><td align=right>%5</td></tr>"
           "<tr><td><b>live</b></td><td align=right><b>%6</b></td></tr>"
           "<tr><td>peak</td><td align=right>%7</td></tr></table>")
            .arg(widgets::formatBytes(m.params), widgets::formatBytes(m.grads), widgets::formatBytes(m.optimizer), widgets::formatBytes(m.activations), widgets::formatBytes(m.comm), widgets::formatBytes(m.live),
             widgets::formatBytes(m.peak));
    if (n.predictedBytes)
        html += QObject::tr("<p>ZeRO formula for params + grads + optimizer: %1</p>").arg(widgets::formatBytes(*n.predictedBytes));
    if (!n.lastLog.isEmpty())
        html += QObject::tr("<p>%1</p>").arg(n.lastLog.toHtmlEscaped());
    return html;
}

} // namespace smol::app
