#include "run_feed.h"

namespace smol::app {

RunFeed::RunFeed(QObject *parent)
    : QObject(parent)
{
    // The live bridge emits from its run thread through queued calls; a
    // test's QSignalSpy keeps the arguments as QVariants.
    qRegisterMetaType<PauseView>();
    qRegisterMetaType<widgets::ClusterStatePtr>();
    qRegisterMetaType<widgets::StepPoint>();
}

RunFeed::~RunFeed() = default;

} // namespace smol::app
