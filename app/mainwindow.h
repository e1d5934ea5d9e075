// The control panel a teacher drives: the cluster (topology, memory bars,
// traffic) in the middle; tabs for the selected node's details, memory by
// category beside the ZeRO formulas, shard ownership, pipeline placement,
// the tensor inspector and the log; charts along the bottom; run controls in
// the tool bar. Wiring only: every figure comes from EngineController's
// snapshots, every action goes to it.
#pragma once

#include "engine_controller.h"

#include <QMainWindow>

#include <map>

class QAction;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QSlider;
class QSpinBox;
class QSplitter;
class QTabWidget;
class QTableView;

namespace smol::widgets {
class ChartsPanel;
class ClusterView;
class MemoryModel;
class MemoryView;
class PlacementEditor;
class ShardMapModel;
class ShardMapView;
class TensorInspector;
} // namespace smol::widgets

namespace smol::app {

class MainWindow : public QMainWindow {
    Q_OBJECT

public:
    explicit MainWindow(EngineController *engine, QWidget *parent = nullptr);

    RunSettings settings() const;
    void setSettings(const RunSettings &settings);
    void setProjectorMode(bool on);
    bool projectorMode() const { return m_projector; }

public Q_SLOTS:
    void startRun();
    void togglePause();

private:
    void buildToolBar();
    void buildTabs();
    int addPage(QWidget *page, const QString &title);
    void buildMenus();
    void showState(const widgets::ClusterStatePtr &state);
    void showSelectedNode();
    void updateRunActions();
    void openSession();
    void showRemoteNodes();

    EngineController *m_engine;
    widgets::ClusterStatePtr m_state;
    int m_selected = -1;
    bool m_projector = false;

    widgets::ClusterView *m_cluster = nullptr;
    widgets::MemoryView *m_memoryView = nullptr;
    widgets::MemoryModel *m_memoryModel = nullptr;
    widgets::ShardMapView *m_shardView = nullptr;
    widgets::PlacementEditor *m_placement = nullptr;
    widgets::TensorInspector *m_inspector = nullptr;
    widgets::ChartsPanel *m_charts = nullptr;
    QTabWidget *m_tabs = nullptr;
    int m_inspectorTab = -1;
    QSplitter *m_split = nullptr;
    QPlainTextEdit *m_log = nullptr;
    QLabel *m_details = nullptr;
    QDoubleSpinBox *m_nodeSlowdown = nullptr;
    QDoubleSpinBox *m_nodeMbit = nullptr;
    QDoubleSpinBox *m_nodeLatency = nullptr;
    std::map<int, std::pair<double, double>> m_links; // node id -> what the user set (Mbit/s, ms)

    QComboBox *m_strategy = nullptr;
    QComboBox *m_model = nullptr;
    QSpinBox *m_nodes = nullptr;
    QSpinBox *m_batch = nullptr;
    QSpinBox *m_steps = nullptr;
    QSpinBox *m_seed = nullptr;
    QDoubleSpinBox *m_lr = nullptr;
    QComboBox *m_optimizer = nullptr;
    QSlider *m_slowMotion = nullptr;
    QLineEdit *m_breakpoint = nullptr;
    QString m_placementSpec;
    QString m_recordPath;

    QAction *m_start = nullptr;
    QAction *m_pause = nullptr;
    QAction *m_step = nullptr;
    QAction *m_stop = nullptr;
    QAction *m_record = nullptr;
    QAction *m_projectorAction = nullptr;
};

} // namespace smol::app
