// A `smolctl` child process for the tests that run real node processes
// (tst_cluster_processes, tst_gloo_cluster): its output collected as it
// arrives, waits for a line, its exit, kill -9, and its --json summary.
// The test target defines SMOLCTL_PATH.
#pragma once

#include <QElapsedTimer>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QStringList>

#include <signal.h>

namespace smol::test {

// A smolctl process whose output is collected as it arrives.
class Smolctl {
public:
    explicit Smolctl(const QStringList &args)
    {
        m_p.setProgram(QStringLiteral(SMOLCTL_PATH));
        m_p.setArguments(args);
        m_p.start();
    }
    ~Smolctl()
    {
        if (m_p.state() != QProcess::NotRunning) {
            m_p.kill();
            m_p.waitForFinished(5000);
        }
    }
    void pump()
    {
        m_p.waitForReadyRead(20);
        m_out += QString::fromUtf8(m_p.readAllStandardOutput());
        m_err += QString::fromUtf8(m_p.readAllStandardError());
    }
    // Waits until stdout+stderr match `re`; returns the match (or an invalid one).
    QRegularExpressionMatch waitFor(const QRegularExpression &re, int ms = 60000)
    {
        QElapsedTimer t;
        t.start();
        for (;;) {
            pump();
            const QRegularExpressionMatch m = re.match(m_err + m_out);
            if (m.hasMatch() || t.elapsed() > ms || m_p.state() == QProcess::NotRunning) {
                pump();
                return re.match(m_err + m_out);
            }
        }
    }
    int finish(int ms = 120000)
    {
        QElapsedTimer t;
        t.start();
        while (m_p.state() != QProcess::NotRunning && t.elapsed() < ms)
            pump();
        pump();
        return m_p.state() == QProcess::NotRunning ? m_p.exitCode() : -1;
    }
    void killNine() { ::kill(pid_t(m_p.processId()), SIGKILL); }
    const QString &out() const { return m_out; }
    const QString &err() const { return m_err; }
    QJsonObject summary() const
    {
        const QStringList lines = m_out.split('\n', Qt::SkipEmptyParts);
        return lines.isEmpty() ? QJsonObject{} : QJsonDocument::fromJson(lines.last().toUtf8()).object();
    }
    int lastStep() const
    {
        static const QRegularExpression re(QStringLiteral("\"step\":(\\d+)"));
        int last = -1;
        for (auto it = re.globalMatch(m_out); it.hasNext();)
            last = it.next().captured(1).toInt();
        return last;
    }

private:
    QProcess m_p;
    QString m_out;
    QString m_err;
};

} // namespace smol::test
