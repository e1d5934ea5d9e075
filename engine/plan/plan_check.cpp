// plan_check: a run measured the way plan_check.h says, and its figures set
// beside the prediction's.
#include "plan_check.h"

#include "engine/session/session_events.h"
#include "engine/trainer.h"
#include "net/communicator.h"
#include "net/device_mesh.h"

#include <QString>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>

namespace smol::engine::plan {

namespace {

// The run's frames, step ends and step peaks, from every thread of it.
class StepMeter : public SessionEventSink {
public:
    explicit StepMeter(int nodes)
        : m_lastStepEnd(std::size_t(nodes), std::numeric_limits<std::int64_t>::min())
        , m_peakActivations(std::size_t(nodes), 0)
    {
    }
    void onFrame(const net::FrameEvent &e) override
    {
        if (e.side != net::FrameEvent::Side::Send || e.src < 0 || std::size_t(e.src) >= m_lastStepEnd.size())
            return;
        std::lock_guard lock(m_mutex);
        m_sends.push_back({e.src, e.sendStartNs, e.bytes, net::groupOfSeq(e.seq)});
    }
    void onSpan(const SpanEvent &s) override
    {
        if (s.kind != SpanEvent::Kind::Step || s.node < 0 || std::size_t(s.node) >= m_lastStepEnd.size())
            return;
        std::lock_guard lock(m_mutex);
        m_lastStepEnd[std::size_t(s.node)] = std::max(m_lastStepEnd[std::size_t(s.node)], s.endNs);
    }
    void onMemory(const MemorySample &m) override
    {
        if (!m.stepPeak || m.node < 0 || std::size_t(m.node) >= m_peakActivations.size())
            return;
        std::lock_guard lock(m_mutex);
        auto &peak = m_peakActivations[std::size_t(m.node)];
        peak = std::max(peak, m.memory.activations);
    }

    std::vector<std::int64_t> peakActivations() const
    {
        std::lock_guard lock(m_mutex);
        return m_peakActivations;
    }
    // Bytes `node` sent inside its steps, by process group (groupOfSeq).
    std::vector<std::uint64_t> sentInSteps(int node) const
    {
        std::lock_guard lock(m_mutex);
        std::vector<std::uint64_t> byGroup(net::kMaxGroupId + 1, 0);
        for (const Send &s : m_sends)
            if (s.node == node && s.startNs <= m_lastStepEnd[std::size_t(node)])
                byGroup[s.group % byGroup.size()] += s.bytes;
        return byGroup;
    }

private:
    struct Send {
        int node;
        std::int64_t startNs;
        std::uint64_t bytes;
        std::uint32_t group;
    };
    mutable std::mutex m_mutex;
    std::vector<Send> m_sends;
    std::vector<std::int64_t> m_lastStepEnd;
    std::vector<std::int64_t> m_peakActivations;
};

QString mib(double bytes)
{
    return QString::number(bytes / (1024.0 * 1024.0), 'f', 3) + " MiB";
}

} // namespace

double FigureCheck::ratio() const
{
    if (predicted == 0)
        return measured == 0 ? 1.0 : std::numeric_limits<double>::infinity();
    return measured / predicted;
}

bool FigureCheck::off() const
{
    return checked && !(std::abs(ratio() - 1.0) <= kTolerance);
}

MeasuredRun measureRun(const TrainConfig &config)
{
    TrainConfig c = config;
    StepMeter meter(c.nodes);
    c.events = &meter;
    const TrainSummary s = runTraining(c);
    MeasuredRun m;
    m.steps = s.steps;
    m.heldAtEnd = s.memoryPerNode;
    m.peakActivations = meter.peakActivations();
    const net::DeviceMesh mesh = c.mesh.empty() ? net::DeviceMesh() : net::DeviceMesh::parse(c.mesh);
    for (int r = 0; r < c.nodes; ++r) {
        const std::vector<std::uint64_t> byGroup = meter.sentInSteps(r);
        double total = 0;
        for (std::uint64_t b : byGroup)
            total += double(b);
        m.bytesPerStep.push_back(total / double(s.steps));
        std::map<std::string, double> axes;
        if (!c.mesh.empty())
            for (const auto &[axis, bytes] : mesh.byAxis(byGroup))
                axes[axis] = double(bytes) / double(s.steps);
        m.bytesByAxis.push_back(axes);
    }
    return m;
}

std::vector<FigureCheck> compareRun(const RunPrediction &p, const MeasuredRun &m)
{
    std::vector<FigureCheck> out;
    for (const NodePrediction &n : p.ranks) {
        const auto r = std::size_t(n.rank);
        const std::string at = " (" + n.label + ")";
        if (n.held && r < m.heldAtEnd.size()) {
            const net::MemoryByCategory &held = m.heldAtEnd[r];
            out.push_back({"params" + at, double(n.held->params), double(held.params)});
            out.push_back({"grads" + at, double(n.held->grads), double(held.grads)});
            out.push_back({"optimizer" + at, double(n.held->optimizer), double(held.optimizer)});
            out.push_back({"model states" + at, double(n.held->total()),
                           double(held.params + held.grads + held.optimizer)});
        }
        if (n.activations && r < m.peakActivations.size())
            out.push_back({"activations" + at, double(*n.activations), double(m.peakActivations[r]), false});
        if (n.bytesPerStep && r < m.bytesPerStep.size())
            out.push_back({"bytes a step" + at, *n.bytesPerStep, m.bytesPerStep[r]});
        if (!n.bytesPerStep || r >= m.bytesByAxis.size())
            continue;
        std::map<std::string, std::pair<double, double>> axes; // predicted, measured; either may be missing
        for (const auto &[axis, bytes] : n.bytesByAxis)
            axes[axis].first = bytes;
        for (const auto &[axis, bytes] : m.bytesByAxis[r])
            axes[axis].second = bytes;
        for (const auto &[axis, both] : axes)
            out.push_back({"bytes a step, " + axis + at, both.first, both.second});
    }
    return out;
}

std::vector<FigureCheck> predictedFigures(const RunPrediction &p)
{
    MeasuredRun none;
    std::size_t ranks = 0;
    for (const NodePrediction &n : p.ranks)
        ranks = std::max(ranks, std::size_t(n.rank) + 1);
    none.heldAtEnd.resize(ranks);
    none.peakActivations.resize(ranks);
    none.bytesPerStep.resize(ranks);
    none.bytesByAxis.resize(ranks);
    return compareRun(p, none);
}

std::string checkLine(const FigureCheck &f)
{
    const double ratio = f.ratio();
    QString verdict;
    if (!f.checked)
        verdict = QStringLiteral("error %1%2% (not checked)")
                      .arg(QString(ratio >= 1 ? "+" : ""))
                      .arg(QString::number(100 * (ratio - 1), 'f', 1));
    else
        verdict = f.off() ? QStringLiteral("OFF (more than %1% from 1)").arg(100 * kTolerance) : QStringLiteral("ok");
    return QStringLiteral("%1 predicted %2   measured %3   ratio %4   %5")
        .arg(QString::fromStdString(f.figure), -44)
        .arg(mib(f.predicted), 12)
        .arg(mib(f.measured), 12)
        .arg(std::isfinite(ratio) ? QString::number(ratio, 'f', 3) : QStringLiteral("inf"))
        .arg(verdict)
        .toStdString();
}

} // namespace smol::engine::plan
