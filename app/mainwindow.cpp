#include "mainwindow.h"

#include <QAction>
#include <QApplication>
#include <QHeaderView>
#include <QMenuBar>
#include <QStatusBar>
#include <QTableView>

namespace smol::app {

using widgets::NodeTableModel;

MainWindow::MainWindow(QWidget *parent)
    : QMainWindow(parent)
    , m_nodeModel(new NodeTableModel(this))
    , m_nodeView(new QTableView(this))
{
    setWindowTitle(QStringLiteral("smolcluster"));

    m_nodeView->setModel(m_nodeModel);
    m_nodeView->verticalHeader()->hide();
    m_nodeView->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_nodeView->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_nodeView->setAlternatingRowColors(true);
    QHeaderView *header = m_nodeView->horizontalHeader();
    header->setSectionResizeMode(QHeaderView::ResizeToContents);
    header->setSectionResizeMode(NodeTableModel::State, QHeaderView::Stretch);
    setCentralWidget(m_nodeView);

    QMenu *fileMenu = menuBar()->addMenu(tr("&File"));
    QAction *quit = fileMenu->addAction(tr("&Quit"), qApp, &QApplication::quit);
    quit->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Q));

    QMenu *viewMenu = menuBar()->addMenu(tr("&View"));
    QAction *fullScreen = viewMenu->addAction(tr("&Full Screen"), this, &MainWindow::toggleFullScreen);
    fullScreen->setShortcut(QKeySequence(Qt::Key_F11));

    statusBar()->showMessage(tr("Starting…"));
    resize(900, 420);
}

void MainWindow::setNodes(std::vector<widgets::NodeRow> nodes)
{
    m_nodeModel->setNodes(std::move(nodes));
}

void MainWindow::showStatus(const QString &text)
{
    statusBar()->showMessage(text);
}

void MainWindow::toggleFullScreen()
{
    setWindowState(windowState() ^ Qt::WindowFullScreen);
}

} // namespace smol::app
