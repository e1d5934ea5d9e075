// The tensor inspector: when the cluster pauses at a collective, every
// node's tensor entering it (and, after a single step, the result) side by
// side: a per-rank table (InspectorModel: count, min, max, mean, std, L2,
// NaN), the selected rank's histogram, a heatmap when the tensor is 2-D and
// small enough to have its values, and buttons to edit one node's tensor
// before resuming (scale, zero, NaN) or to export it (CSV, PNG). It shows
// the snapshots the engine took; it computes nothing itself.
//
// At a pause on a process group's collective (a device mesh's tp, pp, cp or
// dp group) the table lists the held group's members only: each member's
// rank and mesh coordinates and what it contributes (tensor, shape,
// elements, bytes, figures); the nodes held at other collectives are named
// apart, under the table. A world collective's pause looks as it always did.
#pragma once

#include "net/device_mesh.h"

#include <QAbstractTableModel>
#include <QString>
#include <QVector>
#include <QWidget>

#include <vector>

class QLabel;
class QStandardItemModel;
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
    qint64 bytes = 0; // count x the element's size
    // A group's collective: its axis ("tp"), its members' world ranks in
    // group order and the caller's tensor name (`name` is the label, "tp
    // (ranks 0, 1) · g.attn.block0"). Empty for the world's, and in
    // recordings made before groups.
    QString axis;
    QVector<int> members;
    QString tensorName;
    // Read-only tensors riding with an input (PowerSGD's "Q fc1.weight" and
    // "error fc1.weight" beside P), each with its own figures; `rank` is
    // the input's. Shown under the table for the selected input, never edited.
    std::vector<PausedTensor> related;
};

struct PauseView {
    quint64 id = 0;
    QString reason;
    bool complete = false;
    QVector<PausedTensor> inputs;
    QVector<PausedTensor> results; // after a step: the collective's outputs
    int hitRank = -1; // the node whose collective matched the breakpoint; -1: not known (a recording)

    // The held collective's step, the engine's index (widgets/step_number.h); -1: none.
    qint64 step() const { return inputs.isEmpty() ? -1 : inputs.front().step; }
    // The group collective the pause is on: the hit node's input when it is
    // a group's (not knowing the hit node, the first group input); null when
    // the pause is on a world collective.
    const PausedTensor *heldGroup() const;
    // Whether `t` is a tensor of the held group's collective (a member's, at
    // that very collective); every tensor is, at a world pause.
    bool inHeldGroup(const PausedTensor &t) const;
};

class InspectorModel : public QAbstractTableModel {
    Q_OBJECT
public:
    // Coords, Shape and Bytes are a group pause's (hidden at a world pause).
    enum Columns { Rank, Side, Name, Count, Min, Max, Mean, Std, L2, NaN, Coords, Shape, Bytes, NUM_COLUMNS };
    static constexpr int SortRole = Qt::UserRole;
    explicit InspectorModel(QObject *parent = nullptr);
    // Inputs, then results; at a group pause only the held group's members'.
    void setPause(const PauseView &pause);
    // The run's device mesh ("dp=2,pp=2,tp=2", ClusterState::mesh) for the
    // members' coordinates; "" or one that does not parse: none.
    void setMesh(const QString &spec);
    bool groupPause() const { return m_group; }
    // "dp0 · pp0 · tp1" for a rank of the mesh; "" without one.
    QString coordsOf(int rank) const;
    int meshNodes() const { return m_mesh.trivial() ? 0 : m_mesh.nodes(); }
    // A group pause's other held nodes (their inputs), at other collectives.
    const QVector<PausedTensor> &elsewhere() const { return m_elsewhere; }
    // A group pause's members without an input at the held collective.
    const QVector<int> &absentMembers() const { return m_absent; }
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
    QVector<PausedTensor> m_elsewhere;
    QVector<int> m_absent;
    bool m_group = false;
    QStringList m_rankNames;
    net::DeviceMesh m_mesh; // trivial: none
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
    // A group member's: "local-1 (dp0 · pp0 · tp1) input: g.attn.block0
    // [4, 64, 128], 32768 elements, 128 KiB, L2 3.2, mean 0.003, NaN 0".
    static QString memberCaption(const PausedTensor &t, const QString &rankName, const QString &coords);

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
    void setMesh(const QString &spec); // ClusterState::mesh
    void clear();
    void setProjectorMode(bool on);
    InspectorModel *model() const { return m_model; }
    QLabel *caption() const { return m_caption; }
    // A group pause's nodes held at other collectives ("held elsewhere: ...").
    QLabel *elsewhere() const { return m_elsewhere; }
    // The selected input's related tensors (name, shape, elements, min, max,
    // L2), read-only; hidden when it has none.
    QTableView *relatedTable() const { return m_related; }
    QStandardItemModel *relatedModel() const { return m_relatedModel; }
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
    void setUpRelated();
    void fitRelated();                  // what of the related tensors a short or narrow page shows
    int relatedHeight(int rows) const;  // the related table's, header and `rows` rows
    void showRelated(const PausedTensor *input); // fills the related table
    void selectRelated(int row);
    const PausedTensor *selected() const;
    QString titleOf(const PauseView &pause) const;
    QString elsewhereText() const;
    void showElsewhere();
    QString captionOf(const PausedTensor &t) const;

    InspectorModel *m_model;
    QTableView *m_table;
    QLabel *m_relatedTitle = nullptr; // "Riding with local-0's grads.bucket0.P, read-only ..."
    QTableView *m_related = nullptr;
    QString m_relatedText;   // the related title's, also the table's tooltip
    QStandardItemModel *m_relatedModel = nullptr;
    int m_relatedRow = -1;   // the related tensor shown in the plot; -1: the input
    TensorPlot *m_plot;
    QLabel *m_title;
    QLabel *m_caption;       // the selected tensor's, above the plot (wraps)
    QLabel *m_elsewhere;     // a group pause's other held nodes, under the table (wraps)
    QString m_elsewhereText; // all of it (the label may show it elided)
    bool m_complete = true;  // the pause's: every running node held
    QLayout *m_edits = nullptr;
    QDoubleSpinBox *m_factor;
    QPushButton *m_scale, *m_zero, *m_nan;
    int m_row = -1;
};

} // namespace smol::widgets
