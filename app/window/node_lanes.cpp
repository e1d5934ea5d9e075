#include "node_lanes.h"

namespace smol::app {

bool NodeLanes::setState(const widgets::ClusterState &state)
{
    QHash<int, int> idOfRank;
    QStringList names = m_names; // a node that left keeps its lane's name
    QStringList rankNames;
    for (const widgets::NodeState &n : state.nodes) {
        // A lane for each node that is or was in a run (an idle node that
        // never trained has none).
        if (n.id < 0 || (n.rank < 0 && (n.id >= names.size() || names[n.id].isEmpty())))
            continue;
        while (names.size() <= n.id)
            names.append(QString());
        names[n.id] = widgets::displayName(n);
        if (n.rank >= 0) {
            idOfRank.insert(n.rank, n.id);
            while (rankNames.size() <= n.rank)
                rankNames.append(QString());
            rankNames[n.rank] = widgets::displayName(n);
        }
    }
    // Between runs no node has a rank: keep the last run's map for its late events.
    if (!idOfRank.isEmpty())
        m_idOfRank = idOfRank;
    if (!rankNames.isEmpty())
        m_rankNames = rankNames;
    const bool changed = names != m_names;
    m_names = names;
    return changed;
}

void NodeLanes::toLanes(QVector<widgets::TimelineFrameSide> &frames, QVector<widgets::TimelineSpan> &spans,
                        QVector<widgets::TimelineMemorySample> &memory) const
{
    for (auto &f : frames) {
        f.src = laneOfRank(f.src);
        f.dst = laneOfRank(f.dst);
    }
    for (auto &s : spans)
        s.node = laneOfRank(s.node);
    for (auto &m : memory)
        m.node = laneOfRank(m.node);
}

} // namespace smol::app
