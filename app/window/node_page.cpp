#include "node_page.h"

#include "app/bridge/engine_controller.h"
#include "node_details.h"
#include "number_field.h"
#include "widgets/flow_layout.h"

#include <QLabel>
#include <QPushButton>
#include <QSignalBlocker>
#include <QVBoxLayout>

namespace smol::app {

namespace {

QString noNodeText()
{
    return NodePage::tr("Click a node to see its configuration, memory and log.");
}

} // namespace

NodePage::NodePage(EngineController *engine, QWidget *parent)
    : QWidget(parent)
    , m_engine(engine)
{
    m_details = new QLabel(noNodeText(), this);
    m_details->setWordWrap(true);
    m_details->setTextFormat(Qt::RichText);
    m_details->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    m_slowdown = numberField<QDoubleSpinBox>(this, 1.0, 100.0, 1.0, QString(), tr(" x slower"));
    m_slowdown->setToolTip(tr("Emulated compute slowdown of this node in the next run"));
    m_mbit = numberField<QDoubleSpinBox>(this, 0.0, 100000.0, 0.0, QString(), tr(" Mbit/s"));
    m_mbit->setSpecialValueText(tr("unlimited"));
    m_latency = numberField<QDoubleSpinBox>(this, 0.0, 1000.0, 0.0, QString(), tr(" ms"));
    auto *kill = new QPushButton(tr("Kill node"), this);
    auto *addNode = new QPushButton(tr("Add local node"), this);
    auto *removeNode = new QPushButton(tr("Remove node"), this);
    // Rows that wrap (a third of a 1024 px projector is narrow): no control
    // off the page's right edge.
    m_live = new QWidget(this); // what acts on the live cluster, hidden in a replay
    auto *links = new widgets::FlowLayout;
    links->addWidget(new QLabel(tr("Next run:"), m_live));
    links->addWidget(m_slowdown);
    links->addWidget(new QLabel(tr("links"), m_live));
    links->addWidget(m_mbit);
    links->addWidget(m_latency);
    auto *row = new widgets::FlowLayout;
    row->addWidget(kill);
    row->addWidget(removeNode);
    row->addWidget(addNode);
    auto *live = new QVBoxLayout(m_live);
    live->setContentsMargins(0, 0, 0, 0);
    live->addLayout(links);
    live->addLayout(row);
    auto *layout = new QVBoxLayout(this);
    layout->addWidget(m_details, 1);
    layout->addWidget(m_live);

    connect(m_mbit, &QDoubleSpinBox::valueChanged, this, &NodePage::applyLinks);
    connect(m_latency, &QDoubleSpinBox::valueChanged, this, &NodePage::applyLinks);
    connect(m_slowdown, &QDoubleSpinBox::valueChanged, this, [this](double f) {
        if (m_selected >= 0)
            m_engine->setNodeSlowdown(m_selected, f);
    });
    connect(kill, &QPushButton::clicked, this, [this] {
        if (m_selected >= 0)
            m_engine->killNode(m_selected);
    });
    connect(addNode, &QPushButton::clicked, m_engine, &EngineController::addLocalNode);
    connect(removeNode, &QPushButton::clicked, this, [this] {
        if (m_selected >= 0)
            m_engine->removeNode(m_selected);
    });
}

void NodePage::setState(const widgets::ClusterStatePtr &state)
{
    m_state = state;
    refresh();
}

void NodePage::setLiveControlsVisible(bool on)
{
    m_live->setVisible(on);
}

void NodePage::setSelected(int id)
{
    m_selected = id;
    refresh();
}

void NodePage::applyLinks()
{
    if (m_selected < 0)
        return;
    m_links[m_selected] = {m_mbit->value(), m_latency->value()};
    m_engine->setNodeLink(m_selected, m_mbit->value(), m_latency->value());
}

void NodePage::refresh()
{
    if (!m_state || m_selected < 0) {
        m_details->setText(noNodeText());
        return;
    }
    for (const widgets::NodeState &n : m_state->nodes) {
        if (n.id != m_selected)
            continue;
        m_details->setText(nodeDetailsHtml(n));
        const auto link = m_links.find(n.id);
        const QSignalBlocker a(m_slowdown), b(m_mbit), c(m_latency);
        m_slowdown->setValue(n.slowdown);
        m_mbit->setValue(link == m_links.end() ? 0 : link->second.first);
        m_latency->setValue(link == m_links.end() ? 0 : link->second.second);
        return;
    }
}

} // namespace smol::app
