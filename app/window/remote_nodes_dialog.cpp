#include "remote_nodes_dialog.h"

#include "gui_options.h"
#include "widgets/paint/palette.h"

#include <QDialog>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QVBoxLayout>

namespace smol::app {

void showRemoteNodesDialog(QWidget *parent, EngineController *engine, const widgets::ClusterStatePtr &state)
{
    QDialog dialog(parent);
    dialog.setWindowTitle(QObject::tr("Remote nodes"));
    auto *layout = new QVBoxLayout(&dialog);
    layout->addWidget(new QLabel(QObject::tr("On another machine with smolcluster installed, run:"), &dialog));
    auto *command = new QLineEdit(engine->joinCommand(), &dialog);
    command->setReadOnly(true);
    command->setMinimumWidth(640);
    layout->addWidget(command);

    // The port, token and address of the next start, remembered: the same
    // join command every time the window starts (a flag still wins).
    const ListenSettings current{engine->port(), engine->token(), engine->advertise()};
    ListenSettings next = rememberedListenSettings();
    if (next == ListenSettings())
        next = current; // nothing remembered yet: "Remember" keeps today's command
    auto *form = new QFormLayout;
    auto *port = new QSpinBox(&dialog);
    port->setObjectName(QStringLiteral("remotePort"));
    port->setRange(0, 65535);
    port->setSpecialValueText(QObject::tr("any free port"));
    port->setValue(next.port);
    auto *token = new QLineEdit(next.token, &dialog);
    token->setObjectName(QStringLiteral("remoteToken"));
    token->setPlaceholderText(QObject::tr("a new random one at every start"));
    auto *advertise = new QLineEdit(next.advertise, &dialog);
    advertise->setObjectName(QStringLiteral("remoteAdvertise"));
    advertise->setPlaceholderText(QObject::tr("worked out per peer"));
    advertise->setToolTip(QObject::tr("The address other machines reach this one at (several networks, NAT): "
                             "the local nodes' data-plane address and the host in the join command"));
    form->addRow(QObject::tr("Port"), port);
    form->addRow(QObject::tr("Token"), token);
    form->addRow(QObject::tr("Advertise address"), advertise);
    layout->addLayout(form);
    auto *note = new QLabel(&dialog);
    note->setObjectName(QStringLiteral("remoteNote"));
    note->setWordWrap(true);
    const QString listening = QObject::tr("The coordinator is already listening on port %1, so these apply at the next "
                                 "start of the window (--listen, --token and --advertise still win over them).")
                                  .arg(current.port);
    note->setText(listening);
    layout->addWidget(note);
    auto *remember = new QPushButton(QObject::tr("Remember"), &dialog);
    remember->setToolTip(QObject::tr("Use this port, token and address at every start of the window"));
    QObject::connect(remember, &QPushButton::clicked, &dialog, [=] {
        const ListenSettings wanted{quint16(port->value()), token->text().trimmed(), advertise->text().trimmed()};
        if (const QString why = checkListenSettings(wanted); !why.isEmpty()) {
            note->setText(QObject::tr("Not remembered: %1.").arg(why));
            return;
        }
        rememberListenSettings(wanted);
        note->setText(wanted == current
                          ? QObject::tr("Remembered: the window keeps this join command from one start to the next.")
                          : QObject::tr("Remembered for the next start (port %1, %2). %3")
                                .arg(wanted.port ? QString::number(wanted.port) : QObject::tr("any free port"),
                                     wanted.token.isEmpty() ? QObject::tr("a random token") : QObject::tr("token %1").arg(wanted.token),
                                     listening));
    });

    auto *nodes = new QLabel(&dialog);
    nodes->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    auto refresh = [nodes](const widgets::ClusterStatePtr &now) {
        QStringList lines;
        if (now)
            for (const widgets::NodeState &n : now->nodes)
                lines << QObject::tr("%1 (node %2) from %3: %4%5")
                             .arg(widgets::displayName(n))
                             .arg(n.id)
                             .arg(n.host, widgets::runStateName(n.state),
                                  n.reason.isEmpty() ? QString() : QStringLiteral(" (%1)").arg(n.reason));
        nodes->setText(lines.join('\n'));
    };
    refresh(state);
    QObject::connect(engine, &EngineController::stateChanged, &dialog, refresh);
    // Many nodes: the list scrolls rather than grow the dialog off the screen.
    auto *scroll = new QScrollArea(&dialog);
    scroll->setWidget(nodes);
    scroll->setWidgetResizable(true);
    scroll->setMinimumHeight(120);
    layout->addWidget(scroll, 1);
    auto *buttons = new QDialogButtonBox(QDialogButtonBox::Close, &dialog);
    buttons->addButton(remember, QDialogButtonBox::ActionRole);
    QObject::connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
    layout->addWidget(buttons);
    dialog.exec();
}

} // namespace smol::app
