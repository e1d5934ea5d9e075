// The tensor inspector: when the cluster pauses at a collective, every
// node's tensor entering it (and, after a single step, the result) side by
// side: a per-rank table (InspectorModel: count, min, max, mean, std, L2,
// NaN), the selected rank's histogram, a heatmap when the tensor is 2-D and
// small enough to have its values, and buttons to edit one node's tensor
// before resuming (scale, zero, NaN) or to export it (CSV, PNG). It shows
// the snapshots the engine took; it computes nothing itself.
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <QVector>
#include <QWidget>

class QLabel;
class QLayout;
class QTableView;
class QPushButton;
class QDoubleSpinBox;

namespace smol::widgets {

// One node's tensor at a pause (the engine's TensorSnapshot, plain).
struct PausedTensor {
    int rank = -1;
    QString name;
    QString collective;
    qint64 step = -1;
    qint64 count = 0;
    QString part; // what of the collective's buffer this is ("node 2's chunk, elements ...")
    bool before = true;
    double min = 0, max = 0, mean = 0, std = 0, l2 = 0;
    qint64 nanCount = 0;
    QVector<double> values;      // every element, when the engine kept them
    QVector<double> downsampled; // always
    QVector<qint64> histogram;
    double histogramMin = 0, histogramMax = 0;
    QVector<qint64> shape;
};

struct PauseView {
    quint64 id = 0;
    QString reason;
    bool complete = false;
    QVector<PausedTensor> inputs;
    QVector<PausedTensor> results; // after a step: the collective's outputs

    // The held collective's step, the engine's index (widgets/step_number.h); -1: none.
    qint64 step() const { return inputs.isEmpty() ? -1 : inputs.front().step; }
};

class InspectorModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Columns { Rank, Side, Name, Count, Min, Max, Mean, Std, L2, NaN, NUM_COLUMNS };
    static constexpr int SortRole = Qt::UserRole;
    explicit InspectorModel(QObject *parent = nullptr);
    void setPause(const PauseView &pause); // inputs, then results
    // What the Rank column says for each rank (displayName(): "local-0",
    // "0 · pi-1"); without a name, the rank's number.
    void setRankNames(const QStringList &names);
    QString rankName(int rank) const;
    const PausedTensor *tensorAt(int row) const;
    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    QVector<PausedTensor> m_rows;
    QStringList m_rankNames;
};

// The histogram (always) and, for a 2-D tensor with values, a heatmap.
class TensorPlot : public QWidget {
    Q_OBJECT
public:
    explicit TensorPlot(QWidget *parent = nullptr);
    void setTensor(const PausedTensor *tensor); // not owned; copied
    void setProjectorMode(bool on);
    QSize sizeHint() const override { return {420, 260}; }
    // "local-0 input (node 0's chunk, ...): 8224 elements, mean 0.003, NaN 0":
    // what the inspector's caption above the plot says of `t`.
    static QString caption(const PausedTensor &t, const QString &rankName);

protected:
    void paintEvent(QPaintEvent *) override;

private:
    PausedTensor m_tensor;
    bool m_has = false;
    bool m_projector = false;
};

class TensorInspector : public QWidget {
    Q_OBJECT
public:
    explicit TensorInspector(QWidget *parent = nullptr);
    void setPause(const PauseView &pause);
    void setRankNames(const QStringList &names);
    void clear();
    void setProjectorMode(bool on);
    InspectorModel *model() const { return m_model; }
    QLabel *caption() const { return m_caption; }
    // Writes the selected tensor's values (or its downsampled view) as CSV.
    bool exportCsv(const QString &path) const;
    bool exportPng(const QString &path);

Q_SIGNALS:
    // op: "scale", "zero" or "nan".
    void editRequested(int rank, const QString &op, double factor);

protected:
    void resizeEvent(QResizeEvent *event) override;

private:
    void fitColumns(); // hide the least needed columns rather than scroll sideways
    void fitPlot();    // hide the histogram rather than lay it over the buttons
    void selectRow(int row);
    const PausedTensor *selected() const;

    InspectorModel *m_model;
    QTableView *m_table;
    TensorPlot *m_plot;
    QLabel *m_title;
    QLabel *m_caption; // the selected tensor's, above the plot (wraps)
    QLayout *m_edits = nullptr;
    QDoubleSpinBox *m_factor;
    QPushButton *m_scale, *m_zero, *m_nan;
    int m_row = -1;
};

} // namespace smol::widgets
