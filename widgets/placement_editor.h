// The pipeline strategy's placement, edited by clicking: one row per model
// layer (in order) and one column per node, plus a "not placed" column on
// the left. Each layer is a chip in the column of the node holding it, in
// that node's colour, so each pipeline stage reads as a coloured run of
// chips. Click a node's header to select it, then click layer chips to move
// them onto it (clicking an empty cell in a node's column does both; a
// right click takes a layer off its node).
//
// The text form is the engine's (engine/placement.h): comma-separated
// FIRST-LAST:NODE or LAYER:NODE items in layer order, e.g. "0-1:0,2-4:1,5:2";
// unplaced layers are left out. The editor only parses and prints that
// syntax. Whether a placement may run (contiguous ranges, every node used)
// is the validator's decision, normally the engine's: an edit it refuses is
// not applied; the editor keeps the previous placement, shows the reason
// and emits placementRejected.
#pragma once

#include <QRectF>
#include <QStringList>
#include <QVector>
#include <QWidget>

#include <functional>

class QLabel;

namespace smol::widgets {

class PlacementEditor : public QWidget {
    Q_OBJECT

public:
    // Returns "" when `spec` is acceptable, otherwise a one-line reason.
    using Validator = std::function<QString(const QString &spec)>;

    explicit PlacementEditor(QWidget *parent = nullptr);

    // A different number of layers clears the placement; renaming keeps it.
    void setLayers(const QStringList &names);
    QStringList layers() const { return m_layers; }
    // Layers on nodes that no longer exist become unplaced.
    void setNodes(int count);
    int nodes() const { return m_nodes; }
    // No validator: every syntactically valid placement is accepted.
    void setValidator(Validator validator) { m_validator = std::move(validator); }

    QString spec() const;
    // Parses the text form (whitespace allowed, items in any order, "" = no
    // layer placed) and, when the validator accepts it too, applies it and
    // returns true (placementChanged when the spec changes). Otherwise it
    // returns false, shows why and keeps the current placement; no signal.
    bool setSpec(const QString &spec);

    int selectedNode() const { return m_selected; }
    void setSelectedNode(int node);

    // Widget coordinates, for tests and tours: where layer `layer`'s chip is
    // drawn now (it moves with its node) and node `node`'s header.
    QRectF chipRect(int layer) const;
    QRectF nodeHeaderRect(int node) const;

    void setProjectorMode(bool on);
    bool projectorMode() const { return m_projector; }

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

Q_SIGNALS:
    void placementChanged(const QString &spec);
    void placementRejected(const QString &reason);

protected:
    void paintEvent(QPaintEvent *event) override;
    void mousePressEvent(QMouseEvent *event) override;
    void resizeEvent(QResizeEvent *event) override;

private:
    struct Geometry {
        QRectF area; // the grid, above the message label
        qreal headerHeight = 0;
        qreal columnWidth = 0; // the "not placed" column is one too
        qreal rowHeight = 0;
    };
    Geometry geometry() const;
    QRectF cellRect(int layer, int column) const; // column 0: not placed; c + 1: node c
    QFont viewFont() const;
    int messageHeight() const; // the reason/hint label under the grid
    void layoutMessage();
    // Applies `nodeOfLayer` if the validator accepts it; emits accordingly.
    void tryApply(const QVector<int> &nodeOfLayer);
    void showHint();
    void showReason(const QString &reason);
    static QString format(const QVector<int> &nodeOfLayer);
    // nodeOfLayer for `spec`, or an error message in `error`.
    QVector<int> parse(const QString &spec, QString *error) const;

    QStringList m_layers;
    int m_nodes = 0;
    QVector<int> m_nodeOfLayer; // by layer: a node, or -1 when not placed
    int m_selected = -1;
    Validator m_validator;
    QLabel *m_message = nullptr;
    bool m_projector = false;
};

} // namespace smol::widgets
