// The main window: the node table and a status bar. Wiring only: it shows
// the snapshots it is handed and owns no cluster state.
#pragma once

#include "widgets/node_table_model.h"

#include <QMainWindow>

#include <vector>

class QTableView;

namespace smol::app {

class MainWindow : public QMainWindow {
    Q_OBJECT

public:
    explicit MainWindow(QWidget *parent = nullptr);

    void setNodes(std::vector<widgets::NodeRow> nodes);
    void showStatus(const QString &text);

private:
    void toggleFullScreen();

    widgets::NodeTableModel *m_nodeModel = nullptr;
    QTableView *m_nodeView = nullptr;
};

} // namespace smol::app
