// The Node tab: the selected node's details (node_details.h) and what the
// user sets on it for the next run (an emulated compute slowdown, emulated
// links to every other node), with Kill node, Remove node and Add local
// node. Settings go to the engine as they change; the links the user set
// are remembered here, to show them again when the node is selected. In a
// replay the node shown is a recorded one: the live controls hide.
#pragma once

#include "widgets/cluster_state.h"

#include <QWidget>

#include <map>
#include <utility>

class QDoubleSpinBox;
class QLabel;

namespace smol::app {

class EngineController;

class NodePage : public QWidget {
    Q_OBJECT

public:
    NodePage(EngineController *engine, QWidget *parent = nullptr);

    // The cluster as it is now, and the node it shows (-1: none).
    void setState(const widgets::ClusterStatePtr &state);
    void setSelected(int id);
    int selected() const { return m_selected; }
    // The next run's settings and Kill / Remove / Add node (false: a replay).
    void setLiveControlsVisible(bool on);
    void refresh(); // the selected node's details again

private:
    void applyLinks();

    EngineController *m_engine;
    widgets::ClusterStatePtr m_state;
    int m_selected = -1;
    QLabel *m_details = nullptr;
    QWidget *m_live = nullptr;
    QDoubleSpinBox *m_slowdown = nullptr;
    QDoubleSpinBox *m_mbit = nullptr;
    QDoubleSpinBox *m_latency = nullptr;
    std::map<int, std::pair<double, double>> m_links; // node id -> what the user set (Mbit/s, ms)
};

} // namespace smol::app
