// Frame header encoding and the decoder state machine: round trips, every
// rejection reason, payloads arriving in arbitrary pieces, redirection.
#include "net/frame.h"

#include <QtTest>

#include <QRandomGenerator>
#include <QtEndian>

#include <cstring>

using namespace smol::net;

class TestFrame : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void roundTrip_data();
    void roundTrip();
    void rejects_data();
    void rejects();
    void payloadInRandomPieces();
    void redirectedPayload();
    void growsOnlyAsBytesArrive();
    void recycledBuffersLargerThanTheFrame();
};

namespace {

FrameHeader header(std::uint64_t payload, Shape shape = {})
{
    FrameHeader h;
    h.src = 1;
    h.dst = 0;
    h.meta.kind = CollectiveKind::AllReduce;
    h.meta.seq = 42;
    h.meta.tag = 7;
    h.meta.dtype = DType::Float32;
    h.meta.shape = shape;
    h.sendStartNs = 123456789;
    h.payloadBytes = payload;
    return h;
}

QByteArray encoded(const FrameHeader &h)
{
    QByteArray b(int(kHeaderBytes), '\0');
    encodeHeader(h, b.data());
    return b;
}

} // namespace

void TestFrame::roundTrip_data()
{
    QTest::addColumn<int>("ndim");
    QTest::addColumn<qint64>("payload");
    QTest::addColumn<int>("dtype");
    QTest::newRow("empty") << 0 << qint64(0) << int(DType::Float32);
    QTest::newRow("flat floats") << 0 << qint64(4000) << int(DType::Float32);
    QTest::newRow("1-D doubles") << 1 << qint64(8 * 1000) << int(DType::Float64);
    QTest::newRow("8-D int64") << 8 << qint64(8 * 256) << int(DType::Int64);
}

void TestFrame::roundTrip()
{
    QFETCH(int, ndim);
    QFETCH(qint64, payload);
    QFETCH(int, dtype);
    FrameHeader h = header(std::uint64_t(payload));
    h.meta.dtype = DType(dtype);
    const std::int64_t numel = payload / std::int64_t(dtypeSize(h.meta.dtype));
    h.meta.shape.ndim = std::uint8_t(ndim);
    if (ndim > 0) {
        // Spread numel over ndim dims: first dim takes what the 2s leave.
        std::int64_t rest = numel;
        for (int i = 1; i < ndim; ++i) {
            h.meta.shape.dims[std::size_t(i)] = 2;
            rest /= 2;
        }
        h.meta.shape.dims[0] = rest;
    }
    QByteArray bytes = encoded(h);
    QByteArray body(int(payload), '\0');
    for (int i = 0; i < body.size(); ++i)
        body[i] = char(i * 31);
    bytes += body;

    FrameDecoder dec(1, 0, 1 << 20);
    std::vector<Message> got;
    QVERIFY2(dec.feed(bytes.constData(), std::size_t(bytes.size()), [&](Message &&m) { got.push_back(std::move(m)); }),
             dec.error().c_str());
    QCOMPARE(got.size(), std::size_t(1));
    const Message &m = got[0];
    QCOMPARE(m.src, 1);
    QCOMPARE(m.meta.kind, CollectiveKind::AllReduce);
    QCOMPARE(m.meta.seq, std::uint64_t(42));
    QCOMPARE(m.meta.tag, std::uint32_t(7));
    QCOMPARE(m.meta.dtype, DType(dtype));
    QCOMPARE(int(m.meta.shape.ndim), ndim);
    QCOMPARE(dec.header().sendStartNs, std::int64_t(123456789));
    QCOMPARE(m.payload.size(), std::size_t(payload));
    QVERIFY(std::memcmp(m.payload.data(), body.constData(), std::size_t(payload)) == 0);
}

void TestFrame::rejects_data()
{
    QTest::addColumn<int>("offset");
    QTest::addColumn<QByteArray>("bytes"); // written little-endian at offset
    QTest::addColumn<QString>("reason");
    auto le32 = [](std::uint32_t v) { QByteArray b(4, '\0'); qToLittleEndian(v, b.data()); return b; };
    auto le64 = [](std::uint64_t v) { QByteArray b(8, '\0'); qToLittleEndian(v, b.data()); return b; };
    QTest::newRow("bad magic") << 0 << QByteArray("HTTP") << "bad magic";
    QTest::newRow("future version") << 4 << QByteArray("\x02\x00", 2) << "unsupported protocol version 2";
    QTest::newRow("unknown type") << 6 << QByteArray("\x09", 1) << "unknown frame type 9";
    QTest::newRow("unknown dtype") << 7 << QByteArray("\x00", 1) << "unknown dtype 0";
    QTest::newRow("wrong source") << 8 << le32(3) << "source rank 3";
    QTest::newRow("wrong destination") << 12 << le32(5) << "destination rank 5";
    QTest::newRow("unknown kind") << 16 << QByteArray("\x63", 1) << "unknown collective kind 99";
    QTest::newRow("too many dims") << 17 << QByteArray("\x09", 1) << "too many dimensions";
    QTest::newRow("flags") << 18 << QByteArray("\x01\x00", 2) << "reserved flags";
    QTest::newRow("stray dim") << 40 + 8 * 5 << le64(3) << "unused dimension 5";
    QTest::newRow("over cap") << 104 << le64(std::uint64_t(1) << 31) << "exceeds the cap";
    QTest::newRow("not whole elements") << 104 << le64(4001) << "not a whole number";
    QTest::newRow("shape mismatch") << 17 << QByteArray("\x01", 1) << "shape/length mismatch";
    QTest::newRow("negative dim") << 17 << QByteArray("\x01", 1) + QByteArray(22, '\0') << "shape/length mismatch";
}

void TestFrame::rejects()
{
    QFETCH(int, offset);
    QFETCH(QByteArray, bytes);
    QFETCH(QString, reason);
    QByteArray frame = encoded(header(4000));
    if (QTest::currentDataTag() == QByteArray("negative dim")) {
        // ndim 1 with dims[0] = -1000
        frame[17] = 1;
        qToLittleEndian<std::int64_t>(-1000, frame.data() + 40);
    } else {
        frame.replace(offset, bytes.size(), bytes);
    }
    FrameDecoder dec(1, 0, std::uint64_t(1) << 30);
    int frames = 0;
    QVERIFY(!dec.feed(frame.constData(), std::size_t(frame.size()), [&](Message &&) { ++frames; }));
    QCOMPARE(frames, 0);
    QCOMPARE(dec.state(), FrameDecoder::State::Error);
    QVERIFY2(QString::fromStdString(dec.error()).contains(reason), dec.error().c_str());
    // The error state is final.
    QCOMPARE(dec.buffer().second, std::size_t(0));
}

void TestFrame::payloadInRandomPieces()
{
    // Several frames, one larger than the decoder's initial payload buffer,
    // arriving in pieces of random size.
    QByteArray stream;
    std::vector<QByteArray> bodies;
    for (std::uint64_t len : {std::uint64_t(12), std::uint64_t(3u << 20) + 4, std::uint64_t(0), std::uint64_t(4096)}) {
        stream += encoded(header(len));
        QByteArray body(int(len), '\0');
        for (int i = 0; i < body.size(); ++i)
            body[i] = char((i * 7919) >> 3);
        bodies.push_back(body);
        stream += body;
    }
    QRandomGenerator rng(7);
    FrameDecoder dec(1, 0, std::uint64_t(1) << 30);
    std::vector<Message> got;
    for (int at = 0; at < stream.size();) {
        const int n = std::min(int(rng.bounded(1, 300000)), int(stream.size()) - at);
        QVERIFY(dec.feed(stream.constData() + at, std::size_t(n), [&](Message &&m) { got.push_back(std::move(m)); }));
        at += n;
    }
    QCOMPARE(got.size(), bodies.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        QCOMPARE(got[i].payload.size(), std::size_t(bodies[i].size()));
        QVERIFY2(std::memcmp(got[i].payload.data(), bodies[i].constData(), got[i].payload.size()) == 0,
                 qPrintable(QString("payload %1 corrupted").arg(i)));
    }
}

void TestFrame::redirectedPayload()
{
    QByteArray body(1000, 'x');
    QByteArray frame = encoded(header(1000)) + body;
    FrameDecoder dec(1, 0, 1 << 20);
    std::vector<char> dst(1000, 0);
    auto [p, n] = dec.buffer();
    std::memcpy(p, frame.constData(), n);
    QCOMPARE(dec.commit(n), FrameDecoder::Event::HeaderReady);
    dec.redirectPayload(dst.data());
    QVERIFY(dec.payloadRedirected());
    auto [p2, n2] = dec.buffer();
    QCOMPARE(p2, dst.data());
    std::memcpy(p2, frame.constData() + kHeaderBytes, n2);
    QCOMPARE(dec.commit(n2), FrameDecoder::Event::FrameReady);
    QCOMPARE(dec.takeFrame().payload.size(), std::size_t(0));
    QCOMPARE(std::string(dst.data(), 1000), std::string(1000, 'x'));
}

void TestFrame::growsOnlyAsBytesArrive()
{
    // A header claiming 512 MiB (under the cap) followed by 10 bytes must not
    // make the decoder allocate 512 MiB.
    QByteArray frame = encoded(header(std::uint64_t(512) << 20)) + QByteArray(10, 'y');
    FrameDecoder dec(1, 0, std::uint64_t(1) << 30);
    QVERIFY(dec.feed(frame.constData(), std::size_t(frame.size()), {}));
    QCOMPARE(dec.state(), FrameDecoder::State::Payload);
    QVERIFY(dec.bufferedCapacity() <= (std::size_t(1) << 20));
}

void TestFrame::recycledBuffersLargerThanTheFrame()
{
    // A recycled buffer may be larger than the frame; the decoder must still
    // stop at the frame's end and leave the next header alone.
    QByteArray stream;
    for (int len : {300, 8, 1000}) {
        stream += encoded(header(std::uint64_t(len)));
        stream += QByteArray(len, char('a' + len % 26));
    }
    FrameDecoder dec(1, 0, 1 << 20);
    dec.setBufferSource([](std::size_t) { Payload p; p.reserve(1 << 16); return p; });
    std::vector<Message> got;
    QVERIFY2(dec.feed(stream.constData(), std::size_t(stream.size()), [&](Message &&m) { got.push_back(std::move(m)); }),
             dec.error().c_str());
    QCOMPARE(got.size(), std::size_t(3));
    QCOMPARE(got[0].payload.size(), std::size_t(300));
    QCOMPARE(got[1].payload.size(), std::size_t(8));
    QCOMPARE(got[2].payload.size(), std::size_t(1000));
    QCOMPARE(got[2].payload.data()[999], char('a' + 1000 % 26));
}

QTEST_GUILESS_MAIN(TestFrame)
#include "tst_frame.moc"
