// Memory per node as bars: one vertical bar per node (in id order) stacked by
// category (params, grads, optimizer, activations, comm; the colours of every
// other view), a black tick across it at the node's peak, its live size on
// top, and, when the engine sent one, a hollow dashed bar beside it at what
// the ZeRO formula predicts for params+grads+optimizer, so the class can check
// the formula against the stacked bottom three segments. The y axis is MiB
// with 1-2-5 ticks; a legend names every colour and mark. The view draws the
// snapshot it is given and nothing else; it repaints on setState().
#pragma once

#include "widgets/cluster_state.h"

#include <QFont>
#include <QRectF>
#include <QSize>
#include <QVector>
#include "widgets/snapshot_view.h"

#include <QWidget>

namespace smol::widgets {

struct Palette;

class MemoryView : public SnapshotView {
    Q_OBJECT

public:
    explicit MemoryView(QWidget *parent = nullptr)
        : SnapshotView(parent)
    {
    }
    // A compared run (File > Compare with...): beside each node's bar, a
    // lighter stacked bar labelled "B" for the node of the same rank in
    // this snapshot, on the same scale; nullptr: none.
    void setComparisonState(ClusterStatePtr b);
    ClusterStatePtr comparisonState() const { return m_compare; }

    // Axis ticks in MiB: 0, step, 2 step, ... up to the first tick at or
    // above maxMiB, with step 1, 2 or 5 times a power of ten, about
    // `approxTicks` of them. Public for tests.
    static QVector<double> axisTicks(double maxMiB, int approxTicks = 5);

    QSize sizeHint() const override { return {640, 420}; }

    // For tests: the legend as laid out now (each entry's rect and text, in
    // legendFont()), the bars' area, and what is written under each bar
    // (a node's name or rank; "" where crowded ranks skip one).
    struct LegendEntry {
        QRectF rect;     // swatch and text
        QRectF textRect; // the text, word-wrapped in it
        QString text;
    };
    QVector<LegendEntry> legendEntries() const;
    QFont legendFont() const;
    QRectF plotArea() const;
    QStringList nodeLabels() const;
    // Room for the legend (three rows of large type on a projector) and a
    // plot whose axis labels do not run into the node names.
    QSize minimumSizeHint() const override { return {260, m_projector ? 360 : 200}; }

protected:
    void paintEvent(QPaintEvent *event) override;
    bool event(QEvent *event) override; // tooltips

private:
    struct Fonts {
        QFont plain, bold, small;
    };
    struct Geometry {
        double font = 12;            // pixels
        Fonts fonts;                 // at that size
        QFont legendFont;            // plain, or small in a narrow view
        QVector<QRectF> legendItems; // swatch + label, one per legend entry
        double legendBottom = 0;
        QRectF plot;                 // the bars' area; y = 0 at plot.bottom()
        QVector<int> order;          // indices into state->nodes, by id
        double slot = 0;             // width per node
        QVector<double> ticks;       // MiB
        int decimals = 0;            // what the tick labels need
        bool hasPredicted = false;
        bool hasStepPeaks = false; // some node's activations were higher earlier in its step
        bool ranksOnly = false;      // under the bars: ranks, not names (too many nodes)
        // Widths in a slot's group, left to right: the stack, the compared
        // run's stack ("B", 0 without one), the hollow prediction (0 without).
        double barWidth = 0;
        double compareGap = 0, compareWidth = 0;
        double predictedGap = 0, predictedWidth = 0;
        double groupWidth = 0;

        double y(double bytes) const; // on the plot
    };
    Geometry geometry() const;
    void layoutLegend(Geometry &g, double margin) const;
    static QRectF legendTextRect(const QRectF &item, double lineHeight);
    QString slotLabel(const Geometry &g, int slot, QFont *font) const;
    QVector<QString> legendLabels(const Geometry &g) const;
    static std::int64_t stepPeakTop(const NodeState &node);
    // The paint phases, in painting order; the bar ones for one slot.
    void paintLegend(QPainter &p, const Geometry &g, const Palette &pal) const;
    void paintAxis(QPainter &p, const Geometry &g, const Palette &pal) const;
    void paintStack(QPainter &p, const Geometry &g, const Palette &pal, int slot) const;
    void paintPrediction(QPainter &p, const Geometry &g, const Palette &pal, int slot) const;
    void paintComparison(QPainter &p, const Geometry &g, const Palette &pal, int slot) const;
    void paintNodeLabels(QPainter &p, const Geometry &g, const Palette &pal, int slot) const;

    ClusterStatePtr m_compare;
};

} // namespace smol::widgets
