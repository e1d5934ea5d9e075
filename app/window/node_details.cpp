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
    // Beside the memory now, each category's largest in the node's newest
    // step (the engine's step peaks): ddp's activations live only between
    // its forward and backward, so "now" at a collective shows almost none.
    const net::MemoryByCategory &p = n.stepPeak;
    const bool peaks = p.peak > 0;
    html += QObject::tr("<table><tr><td></td><td align=right><i>now</i></td>%1</tr>")
                .arg(peaks ? QObject::tr("<td align=right>&nbsp;<i>step peak</i></td>") : QString());
    const struct {
        QString label;
        std::int64_t now, peak;
    } rows[] = {{QObject::tr("params"), m.params, p.params},
                {QObject::tr("grads"), m.grads, p.grads},
                {QObject::tr("optimizer"), m.optimizer, p.optimizer},
                {QObject::tr("activations"), m.activations, p.activations},
                {QObject::tr("comm buffers"), m.comm, p.comm},
                {QObject::tr("<b>live</b>"), m.live, p.live},
                {QObject::tr("peak"), m.peak, p.peak}};
    for (const auto &r : rows) {
        html += QStringLiteral("<tr><td>%1</td><td align=right>%2</td>").arg(r.label, widgets::formatBytes(r.now));
        if (peaks)
            html += QStringLiteral("<td align=right>%1</td>").arg(widgets::formatBytes(r.peak));
        html += QStringLiteral("</tr>");
    }
    html += QStringLiteral("</table>");
    if (n.predictedBytes)
        html += QObject::tr("<p>ZeRO formula for params + grads + optimizer: %1</p>").arg(widgets::formatBytes(*n.predictedBytes));
    if (!n.lastLog.isEmpty())
        html += QObject::tr("<p>%1</p>").arg(n.lastLog.toHtmlEscaped());
    return html;
}

} // namespace smol::app
