// Engine threads (the run, the node agents, the coordinator's log) speak to
// the GUI through here: a signal emitted later on the GUI thread, and not at
// all once its object has gone (the window closed while a node logged).
#pragma once

#include <QCoreApplication>
#include <QMetaObject>
#include <QPointer>

namespace smol::app {

template <typename Object, typename Signal, typename... Args>
void emitQueued(const QPointer<Object> &object, Signal signal, Args... args)
{
    QMetaObject::invokeMethod(
        QCoreApplication::instance(),
        [object, signal, args...] {
            if (object)
                Q_EMIT(object.data()->*signal)(args...);
        },
        Qt::QueuedConnection);
}

} // namespace smol::app
