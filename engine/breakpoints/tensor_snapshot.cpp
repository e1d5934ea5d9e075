// Builds TensorSnapshots (stats, histogram, downsampled curve) from collective
// buffers, and applies TensorEdits to them in place.
#include "tensor_snapshot.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <cmath>
#include <limits>

namespace smol::engine {

namespace {

double elementAt(const net::TensorView &v, std::size_t i)
{
    switch (v.dtype) {
    case net::DType::Float32: return double(static_cast<const float *>(v.data)[i]);
    case net::DType::Float64: return static_cast<const double *>(v.data)[i];
    case net::DType::Int64: return double(static_cast<const std::int64_t *>(v.data)[i]);
    case net::DType::Int32: return double(static_cast<const std::int32_t *>(v.data)[i]);
    case net::DType::UInt8: return double(static_cast<const std::uint8_t *>(v.data)[i]);
    case net::DType::Float16: return double(net::halfToFloat(static_cast<const std::uint16_t *>(v.data)[i]));
    case net::DType::BFloat16: return double(net::bfloat16ToFloat(static_cast<const std::uint16_t *>(v.data)[i]));
    }
    return 0;
}

void setElement(const net::TensorView &v, std::size_t i, double x)
{
    switch (v.dtype) {
    case net::DType::Float32: static_cast<float *>(v.data)[i] = float(x); break;
    case net::DType::Float64: static_cast<double *>(v.data)[i] = x; break;
    case net::DType::Int64: static_cast<std::int64_t *>(v.data)[i] = std::int64_t(x); break;
    case net::DType::Int32: static_cast<std::int32_t *>(v.data)[i] = std::int32_t(x); break;
    case net::DType::UInt8: static_cast<std::uint8_t *>(v.data)[i] = std::uint8_t(x); break;
    case net::DType::Float16: static_cast<std::uint16_t *>(v.data)[i] = net::floatToHalf(float(x)); break;
    case net::DType::BFloat16: static_cast<std::uint16_t *>(v.data)[i] = net::floatToBFloat16(float(x)); break;
    }
}

} // namespace

void applyEdit(const net::TensorView &v, const TensorEdit &e)
{
    if (e.op == TensorEdit::Op::InjectNaN && e.index >= 0) {
        setElement(v, std::size_t(e.index), std::nan(""));
        return;
    }
    const double nan = std::nan("");
    for (std::size_t i = 0; i < v.count; ++i)
        setElement(v, i, e.op == TensorEdit::Op::Scale ? elementAt(v, i) * e.factor
                         : e.op == TensorEdit::Op::Zero ? 0.0
                                                        : nan);
}

namespace {

QJsonObject snapshotObject(const TensorSnapshot &s, std::int64_t maxValues)
{
    QJsonArray shape, values, histogram, downsampled;
    for (auto d : s.shape)
        shape.append(double(d));
    if (std::int64_t(s.values.size()) <= maxValues)
        for (double v : s.values)
            values.append(std::isfinite(v) ? QJsonValue(v) : QJsonValue(QString::number(v)));
    for (auto h : s.histogram)
        histogram.append(double(h));
    for (double v : s.downsampled)
        downsampled.append(std::isfinite(v) ? QJsonValue(v) : QJsonValue(QString::number(v)));
    QJsonObject o{{"node", s.node},
                  {"step", double(s.step)},
                  {"kind", net::collectiveName(s.kind)},
                  {"seq", QString::number(s.seq)},
                  {"name", QString::fromStdString(s.name)},
                  {"peer", s.peer},
                  {"before", s.before},
                  {"edited", s.edited},
                  {"offset", double(s.offset)},
                  {"total", double(s.total)},
                  {"dtype", net::dtypeName(s.dtype)},
                  {"shape", shape},
                  {"count", double(s.count)},
                  {"values", values},
                  {"values_omitted", std::int64_t(s.values.size()) > maxValues},
                  {"min", s.stats.min},
                  {"max", s.stats.max},
                  {"mean", s.stats.mean},
                  {"std", s.stats.std},
                  {"l2", s.stats.l2},
                  {"nan", double(s.stats.nanCount)},
                  {"inf", double(s.stats.infCount)},
                  {"histogram_min", s.histogramMin},
                  {"histogram_max", s.histogramMax},
                  {"histogram", histogram},
                  {"downsampled", downsampled}};
    if (!s.members.empty()) {
        QJsonArray members;
        for (int m : s.members)
            members.append(m);
        // Only a group's: a world pause's JSON is as before.
        o.insert("axis", QString::fromStdString(s.axis));
        o.insert("members", members);
        o.insert("buffer_name", QString::fromStdString(s.bufferName));
    }
    if (!s.related.empty()) // only a pause with them: any other JSON is as before
        o.insert("related", relatedToJson(s.related));
    return o;
}

constexpr qsizetype kMaxGroupMembers = 4096;

// snapshotToJson writes non-finite values as strings ("nan", "inf", "-inf").
double jsonNumber(const QJsonValue &v)
{
    if (!v.isString())
        return v.toDouble();
    const QString s = v.toString().trimmed().toLower();
    if (s.contains(QLatin1String("nan")))
        return std::numeric_limits<double>::quiet_NaN();
    if (s == QLatin1String("inf") || s == QLatin1String("+inf"))
        return std::numeric_limits<double>::infinity();
    if (s == QLatin1String("-inf"))
        return -std::numeric_limits<double>::infinity();
    return s.toDouble();
}

TensorSnapshot snapshotOfObject(const QJsonObject &o)
{
    TensorSnapshot s;
    s.node = o.value("node").toInt(-1);
    s.step = std::int64_t(o.value("step").toDouble());
    const QString kind = o.value("kind").toString();
    for (int k = 0; k <= int(net::CollectiveKind::Pull); ++k)
        if (kind == QLatin1String(net::collectiveName(net::CollectiveKind(k))))
            s.kind = net::CollectiveKind(k);
    s.seq = o.value("seq").toString().toULongLong();
    s.name = o.value("name").toString().toStdString();
    s.peer = o.value("peer").toInt(-1);
    s.before = o.value("before").toBool(true);
    s.edited = o.value("edited").toBool(false);
    s.offset = std::int64_t(o.value("offset").toDouble(0));
    s.total = std::int64_t(o.value("total").toDouble(double(s.count)));
    for (const QJsonValue &d : o.value("shape").toArray())
        s.shape.push_back(std::int64_t(d.toDouble()));
    s.count = std::int64_t(o.value("count").toDouble());
    for (const QJsonValue &v : o.value("values").toArray())
        s.values.push_back(jsonNumber(v));
    s.stats.min = jsonNumber(o.value("min"));
    s.stats.max = jsonNumber(o.value("max"));
    s.stats.mean = jsonNumber(o.value("mean"));
    s.stats.std = jsonNumber(o.value("std"));
    s.stats.l2 = jsonNumber(o.value("l2"));
    s.stats.nanCount = std::int64_t(o.value("nan").toDouble());
    s.stats.infCount = std::int64_t(o.value("inf").toDouble());
    s.histogramMin = jsonNumber(o.value("histogram_min"));
    s.histogramMax = jsonNumber(o.value("histogram_max"));
    for (const QJsonValue &h : o.value("histogram").toArray())
        s.histogram.push_back(std::int64_t(h.toDouble()));
    for (const QJsonValue &v : o.value("downsampled").toArray())
        s.downsampled.push_back(jsonNumber(v));
    // A group's members: world ranks, bounded (a damaged file names no 10^9 of them).
    const QJsonArray members = o.value("members").toArray();
    for (const QJsonValue &m : members)
        if (members.size() <= kMaxGroupMembers && m.isDouble() && m.toInt(-1) >= 0)
            s.members.push_back(m.toInt());
    if (s.members.size() != std::size_t(members.size()))
        s.members.clear();
    s.axis = o.value("axis").toString().toStdString();
    s.bufferName = o.value("buffer_name").toString().toStdString();
    return s;
}

// A name from the network or a file: printable, one line, bounded.
std::string boundedName(const QString &name)
{
    constexpr qsizetype kMaxNameChars = 200;
    QString out;
    for (const QChar c : name.left(kMaxNameChars))
        out.append(c.isPrint() ? c : QChar(u'?'));
    return out.toStdString();
}

} // namespace

QByteArray snapshotToJson(const TensorSnapshot &s, std::int64_t maxValues)
{
    return QJsonDocument(snapshotObject(s, maxValues)).toJson(QJsonDocument::Compact);
}

TensorSnapshot snapshotFromJson(const QByteArray &json)
{
    const QJsonObject o = QJsonDocument::fromJson(json).object();
    TensorSnapshot s = snapshotOfObject(o);
    s.related = relatedFromJson(o.value("related").toArray());
    return s;
}

QJsonArray relatedToJson(const std::vector<TensorSnapshot> &related)
{
    QJsonArray out;
    for (std::size_t i = 0; i < related.size() && i < kMaxRelatedTensors; ++i) {
        TensorSnapshot r = related[i];
        r.related.clear(); // one level: a related tensor has none of its own
        out.append(snapshotObject(r, kRelatedFullLimit));
    }
    return out;
}

std::vector<TensorSnapshot> relatedFromJson(const QJsonArray &array)
{
    // A node's SnapshotOptions are the defaults (64 bins, 256 points); these
    // only stop a damaged or hostile message from growing without bound.
    constexpr std::size_t kMaxBins = 1024, kMaxPoints = 4096;
    std::vector<TensorSnapshot> out;
    for (const QJsonValue &v : array) {
        if (out.size() >= kMaxRelatedTensors)
            break;
        if (!v.isObject())
            continue;
        TensorSnapshot r = snapshotOfObject(v.toObject());
        r.name = boundedName(QString::fromStdString(r.name));
        r.axis.clear();
        r.members.clear();
        r.bufferName.clear();
        r.count = std::max<std::int64_t>(0, r.count);
        r.total = r.count;
        r.offset = 0;
        if (std::int64_t(r.values.size()) != r.count || r.count > kRelatedFullLimit)
            r.values.clear();
        if (r.histogram.size() > kMaxBins)
            r.histogram.clear();
        if (r.downsampled.size() > kMaxPoints)
            r.downsampled.clear();
        if (r.shape.size() > std::size_t(net::kMaxDims))
            r.shape = {r.count};
        out.push_back(std::move(r));
    }
    return out;
}

std::vector<TensorSnapshot> takeRelatedSnapshots(const net::CollectiveInfo &info, const SnapshotOptions &options)
{
    SnapshotOptions small = options;
    small.fullLimit = std::min(options.fullLimit, kRelatedFullLimit);
    std::vector<TensorSnapshot> out;
    for (std::size_t i = 0; i < info.related.size() && i < kMaxRelatedTensors; ++i) {
        TensorSnapshot r = takeSnapshot(info.related[i].view, small);
        r.name = info.related[i].name;
        r.kind = info.kind;
        r.seq = info.seq;
        out.push_back(std::move(r));
    }
    return out;
}

TensorSnapshot takeSnapshot(const net::TensorView &v, const SnapshotOptions &options)
{
    TensorSnapshot s;
    s.dtype = v.dtype;
    s.count = std::int64_t(v.count);
    s.total = s.count;
    if (v.shape.ndim == 0)
        s.shape = {s.count};
    for (int i = 0; i < v.shape.ndim; ++i)
        s.shape.push_back(v.shape.dims[std::size_t(i)]);
    if (v.count == 0 || !v.data)
        return s;
    const bool full = s.count <= options.fullLimit;
    if (full)
        s.values.resize(v.count);
    double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0, sq = 0;
    std::int64_t finite = 0;
    for (std::size_t i = 0; i < v.count; ++i) {
        const double x = elementAt(v, i);
        if (full)
            s.values[i] = x;
        if (std::isnan(x)) {
            ++s.stats.nanCount;
        } else if (std::isinf(x)) {
            ++s.stats.infCount;
        } else {
            lo = std::min(lo, x);
            hi = std::max(hi, x);
            sum += x;
            sq += x * x;
            ++finite;
        }
    }
    if (finite > 0) {
        s.stats.min = lo;
        s.stats.max = hi;
        s.stats.mean = sum / double(finite);
        s.stats.std = std::sqrt(std::max(0.0, sq / double(finite) - s.stats.mean * s.stats.mean));
        s.stats.l2 = std::sqrt(sq);
        s.histogramMin = lo;
        s.histogramMax = hi;
    }
    const int bins = std::max(1, options.histogramBins);
    s.histogram.assign(std::size_t(bins), 0);
    const double width = (hi - lo) / bins;
    const std::size_t points = std::min<std::size_t>(v.count, std::size_t(std::max(1, options.downsampledPoints)));
    s.downsampled.assign(points, 0);
    for (std::size_t p = 0; p < points; ++p) {
        // Run p covers elements [p * count / points, (p + 1) * count / points).
        const std::size_t b = p * v.count / points, e = (p + 1) * v.count / points;
        double acc = 0;
        for (std::size_t i = b; i < e; ++i) {
            const double x = elementAt(v, i);
            acc += x;
            if (std::isfinite(x)) {
                const int bin = width > 0 ? std::min(bins - 1, int((x - lo) / width)) : 0;
                ++s.histogram[std::size_t(bin)];
            }
        }
        s.downsampled[p] = acc / double(e - b);
    }
    return s;
}

TensorSnapshot takePartSnapshot(const net::CollectiveInfo &info, bool before, int node, std::int64_t step,
                                const SnapshotOptions &options)
{
    const net::BufferPart part = net::contributedPart(info, before);
    TensorSnapshot s = takeSnapshot(part.whole ? info.buffer : info.buffer.slice(part.offset, part.count), options);
    s.node = node;
    s.step = step;
    s.kind = info.kind;
    s.seq = info.seq;
    s.name = info.label(); // a group's: its axis and members, for the inspector
    s.bufferName = info.name;
    if (info.members) {
        s.axis = info.axis;
        s.members = *info.members;
    }
    s.peer = info.members && info.peer >= 0 && std::size_t(info.peer) < info.members->size()
                 ? (*info.members)[std::size_t(info.peer)] // a group rank: the node's rank
                 : info.peer;
    s.before = before;
    s.offset = std::int64_t(part.offset);
    s.total = std::int64_t(info.buffer.count);
    if (before)
        s.related = takeRelatedSnapshots(info, options);
    return s;
}

std::string partLabel(const TensorSnapshot &s)
{
    if (s.count == s.total)
        return "the whole buffer";
    if (s.count == 0)
        return "nothing yet (it receives)";
    return "node " + std::to_string(s.node) + "'s chunk, elements " + std::to_string(s.offset) + ".." +
           std::to_string(s.offset + s.count - 1) + " of " + std::to_string(s.total);
}

} // namespace smol::engine
