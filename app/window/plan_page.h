// The Plan page: what the next run will hold and send per node, predicted
// from the run settings alone (engine/plan/run_prediction.h, the closed
// forms `smolctl plan` prints), and once a run has finished, what it
// measured beside each prediction and their ratio (engine/plan/plan_check.h,
// as `smolctl plan --check` compares them). Model states and bytes are
// expected within 5%; a row further off is marked. The formulas used are
// listed below the table.
#pragma once

#include "app/bridge/engine_controller.h"

#include <QWidget>

class QLabel;
class QPlainTextEdit;
class QTableView;

namespace smol::widgets {
class CompareTableModel;
}

namespace smol::app {

class PlanPage : public QWidget {
    Q_OBJECT

public:
    explicit PlanPage(QWidget *parent = nullptr);

    // The next run's settings: predictions only.
    void showSettings(const RunSettings &settings);
    // A finished run: its settings' predictions beside what it measured.
    void showMeasured(const RunMeasurement &measurement);

    // For tests: the table's model and the caption above it.
    const widgets::CompareTableModel &model() const { return *m_model; }
    QString caption() const;

private:
    widgets::CompareTableModel *m_model = nullptr;
    QTableView *m_table = nullptr;
    QLabel *m_caption = nullptr;
    QPlainTextEdit *m_formulas = nullptr;
};

} // namespace smol::app
