// The live timeline's lanes are nodes, not ranks: events name ranks (a
// frame's src and dst, a span's or memory sample's node), and after a
// re-form the same rank is another node, so a lane keyed by rank would mix
// two nodes' histories under one name. NodeLanes keeps the newest rank ->
// node id map from the cluster's snapshots and rewrites events to ids on
// their way into the timeline; lane i is node id i, named by
// widgets::displayName(). A replay's lanes stay ranks (a recording is one
// run).
#pragma once

#include "widgets/cluster_state.h"
#include "widgets/timeline/timeline_data.h"

#include <QHash>
#include <QStringList>
#include <QVector>

namespace smol::app {

class NodeLanes {
public:
    // From a snapshot; true when the lane names changed.
    bool setState(const widgets::ClusterState &state);
    // Lane names by node id (empty where no node has that id).
    const QStringList &names() const { return m_names; }
    // Names by rank of the current run, for the charts and the inspector.
    const QStringList &rankNames() const { return m_rankNames; }
    int laneOfRank(int rank) const { return m_idOfRank.value(rank, rank); }

    void toLanes(QVector<widgets::TimelineFrameSide> &frames, QVector<widgets::TimelineSpan> &spans,
                 QVector<widgets::TimelineMemorySample> &memory) const;

private:
    QHash<int, int> m_idOfRank;
    QStringList m_names;
    QStringList m_rankNames;
};

} // namespace smol::app
