// The session file's event tables as rows (docs/session-format.md): each
// table's columns named once, in order, and per event kind one walk that
// pairs every column with the event's field. SessionRecorder walks a row to
// bind an INSERT's parameters; SessionReader walks the same row to decode a
// SELECT's columns, checking each value's range as it goes. A column added
// to a table is added here, and both sides follow. (The CREATE TABLE
// statements stay the recorder's kSchema: they are the file format itself,
// compared statement for statement by the tests.)
//
// A walk's Row is either side: a writer, whose calls take the fields'
// values (the event is const), or a reader, whose calls fill them in. One
// call per column, in the order of the column list:
//   i64, u64     64-bit integers (unsigned ones stored as their int64 bits)
//   f64          a double; NaN is stored as NULL
//   text, blob   a std::string, a QByteArray (null as NULL)
//   flag         a bool as 0 / 1
//   rank         a node: -1 (cluster / coordinator) or a non-negative int
//   collective   a net::CollectiveKind, which must be a known one
//   anyKind      a net::CollectiveKind; an unknown one reads as None
//                (memory samples: a newer file's kind is not an error)
//   spanKind, side, tag   SpanEvent::Kind, FrameEvent::Side, a 32-bit tag
#pragma once

#include "session_events.h"

#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace smol::engine {

struct EventRows {
    // Frames have no rowid: (t_end, id) is their key, ids counting frames
    // in the order they were written.
    static constexpr char kFrameColumns[] = "t_end, id, t_start, side, src, dst, kind, seq, tag, bytes";
    static constexpr char kSpanColumns[] = "t_start, t_end, node, kind, name, step, collective, seq, bytes";
    static constexpr char kMemoryColumns[] =
        "t, node, step, params, grads, optimizer, activations, comm, live, peak, collective, seq, before, step_peak";
    static constexpr char kMetricColumns[] = "t, step, node, name, value";
    static constexpr char kLogColumns[] = "t, node, text";
    static constexpr char kTensorColumns[] =
        "t, pause_id, node, step, collective, seq, name, before, snapshot_json";

    // A frame's t_end is its event time (eventTimeNs: the send's or the
    // receive's completion, by side), so it travels beside the event, with
    // the id, rather than as one of its fields.
    template <class Row, class Frame, class Int> static void frame(Row &r, Frame &e, Int &endNs, Int &id)
    {
        r.i64(endNs);
        r.i64(id);
        frameBody(r, e);
    }

    // A frame's fields after its key: the record of a packed frame
    // (event_slices.h) follows its t_end with these.
    template <class Row, class Frame> static void frameBody(Row &r, Frame &e)
    {
        r.i64(e.sendStartNs);
        r.side(e.side);
        r.rank(e.src);
        r.rank(e.dst);
        r.collective(e.kind);
        r.u64(e.seq);
        r.tag(e.tag);
        r.u64(e.bytes);
    }

    template <class Row, class Span> static void span(Row &r, Span &s)
    {
        r.i64(s.startNs);
        r.i64(s.endNs);
        r.rank(s.node);
        r.spanKind(s.kind);
        r.text(s.name);
        r.i64(s.step);
        r.collective(s.collective);
        r.u64(s.seq);
        r.u64(s.bytes);
    }

    template <class Row, class Sample> static void memory(Row &r, Sample &m)
    {
        r.i64(m.tNs);
        r.rank(m.node);
        r.i64(m.step);
        auto &b = m.memory; // params .. comm in the categories' order, then live and peak
        for (auto *bytes : {&b.params, &b.grads, &b.optimizer, &b.activations, &b.comm, &b.live, &b.peak})
            r.i64(*bytes);
        r.anyKind(m.collective);
        r.u64(m.seq);
        r.flag(m.before);
        r.flag(m.stepPeak);
    }

    template <class Row, class Metric> static void metric(Row &r, Metric &m)
    {
        r.i64(m.tNs);
        r.i64(m.step);
        r.rank(m.node);
        r.text(m.name);
        r.f64(m.value);
    }

    template <class Row, class Log> static void log(Row &r, Log &l)
    {
        r.i64(l.tNs);
        r.rank(l.node);
        r.text(l.text);
    }

    template <class Row, class Tensor> static void tensor(Row &r, Tensor &t)
    {
        r.i64(t.tNs);
        r.u64(t.pauseId);
        r.rank(t.node);
        r.i64(t.step);
        r.collective(t.collective);
        r.u64(t.seq);
        r.text(t.name);
        r.flag(t.before);
        r.blob(t.snapshotJson);
    }

    // The walk of an event of any kind but frames (which take their key).
    template <class Row, class Event> static void row(Row &r, Event &e)
    {
        using E = std::remove_const_t<Event>;
        if constexpr (std::is_same_v<E, SpanEvent>)
            span(r, e);
        else if constexpr (std::is_same_v<E, MemorySample>)
            memory(r, e);
        else if constexpr (std::is_same_v<E, MetricSample>)
            metric(r, e);
        else if constexpr (std::is_same_v<E, LogLine>)
            log(r, e);
        else
            tensor(r, e);
    }
};

} // namespace smol::engine
