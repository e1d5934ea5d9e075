#include "plan_page.h"

#include "app/bridge/run_config.h"
#include "engine/plan/plan_check.h"
#include "widgets/compare_table.h"

#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QPlainTextEdit>
#include <QTableView>
#include <QVBoxLayout>

namespace smol::app {

namespace {

QString bytesText(double bytes)
{
    return QLocale().formattedDataSize(qint64(bytes), 2, QLocale::DataSizeTraditionalFormat);
}

// A figure is bytes, except a ratio; the same words `smolctl plan` uses.
QVector<widgets::CompareTableRow> rowsOf(const std::vector<engine::plan::FigureCheck> &checks, bool measured)
{
    QVector<widgets::CompareTableRow> rows;
    for (const engine::plan::FigureCheck &c : checks) {
        widgets::CompareTableRow r;
        r.figure = QString::fromStdString(c.figure);
        r.a = bytesText(c.predicted);
        if (measured) {
            r.b = bytesText(c.measured);
            r.ratio = QString::number(c.ratio(), 'f', 3) + (c.off() ? QStringLiteral(" \u26a0") : QString());
        } else {
            r.b = QStringLiteral("\u2014");
        }
        rows.push_back(r);
    }
    return rows;
}

QString formulasText(const engine::plan::RunPrediction &p)
{
    QStringList lines;
    for (const std::string &f : p.formulas)
        lines << QString::fromStdString(f);
    return lines.join(QLatin1Char('\n'));
}

} // namespace

PlanPage::PlanPage(QWidget *parent)
    : QWidget(parent)
{
    setObjectName(QStringLiteral("planPage"));
    m_caption = new QLabel(this);
    m_caption->setWordWrap(true);
    m_model = new widgets::CompareTableModel(this);
    m_model->setValueHeaders({tr("predicted"), tr("measured"), tr("measured/predicted")});
    m_table = new QTableView(this);
    m_table->setModel(m_model);
    m_table->verticalHeader()->hide();
    // The figure's name gives way (elided in the middle) so the numbers
    // never scroll sideways in a projector's side panel.
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setSectionResizeMode(widgets::CompareTableModel::Figure, QHeaderView::Stretch);
    m_table->setTextElideMode(Qt::ElideMiddle);
    m_table->setWordWrap(false);
    // The formulas are long: a box that wraps them and scrolls itself.
    m_formulas = new QPlainTextEdit(this);
    m_formulas->setObjectName(QStringLiteral("planFormulas"));
    m_formulas->setReadOnly(true);
    m_formulas->setLineWrapMode(QPlainTextEdit::WidgetWidth);
    m_formulas->setMaximumHeight(m_formulas->fontMetrics().lineSpacing() * 7);
    auto *l = new QVBoxLayout(this);
    l->addWidget(m_caption);
    l->addWidget(m_table, 1);
    l->addWidget(m_formulas);
}

QString PlanPage::caption() const { return m_caption->text(); }

void PlanPage::showSettings(const RunSettings &settings)
{
    QString why;
    const auto prediction = predictionOf(settings, &why);
    if (!prediction) {
        m_caption->setText(tr("No plan for these settings: %1").arg(why));
        m_model->setRows({});
        m_formulas->clear();
        return;
    }
    m_caption->setText(tr("Predicted for the next run: %1 on %2 node(s), %3 parameters; measured after it ends.")
                           .arg(QString::fromStdString(prediction->mesh.empty() ? prediction->strategy
                                                                                 : prediction->mesh + " " +
                                                                                       prediction->strategy))
                           .arg(prediction->nodes)
                           .arg(QLocale().toString(qlonglong(prediction->params))));
    m_model->setRows(rowsOf(engine::plan::predictedFigures(*prediction), false));
    m_formulas->setPlainText(formulasText(*prediction));
}

void PlanPage::showMeasured(const RunMeasurement &m)
{
    QString why;
    const auto prediction = predictionOf(m.settings, &why);
    if (!prediction) {
        m_caption->setText(tr("No plan for the finished run's settings: %1").arg(why));
        return;
    }
    engine::plan::MeasuredRun measured;
    measured.steps = m.steps;
    for (const NodeMeasurement &n : m.ranks) {
        measured.heldAtEnd.push_back(n.memory);
        measured.peakActivations.push_back(n.activationPeak);
        measured.bytesPerStep.push_back(m.steps > 0 ? double(n.stepBytesSent) / double(m.steps) : 0);
        std::map<std::string, double> axes;
        for (auto it = n.stepBytesByAxis.cbegin(); it != n.stepBytesByAxis.cend(); ++it)
            axes[it.key().toStdString()] = m.steps > 0 ? double(it.value()) / double(m.steps) : 0;
        measured.bytesByAxis.push_back(axes);
    }
    const auto checks = engine::plan::compareRun(*prediction, measured);
    int off = 0;
    for (const auto &c : checks)
        off += c.off();
    m_caption->setText(off ? tr("The run that ended, against its plan: %1 figure(s) more than 5% off (\u26a0).").arg(off)
                           : tr("The run that ended, against its plan: model states and bytes within 5%."));
    m_model->setRows(rowsOf(checks, true));
    m_formulas->setPlainText(formulasText(*prediction));
}

} // namespace smol::app
