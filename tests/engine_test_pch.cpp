// Anchor for the engine tests' shared precompiled header.
