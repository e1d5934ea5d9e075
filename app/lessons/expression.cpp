// The lesson format's arithmetic (expression.h): a recursive-descent parser
// into a flat node array, and its evaluation against named values.
#include "expression.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace smol::app {

class ExpressionParser {
public:
    ExpressionParser(const QString &text, Expression &out) : m_text(text), m_out(out) {}

    int parse()
    {
        const int root = sum();
        skipSpace();
        if (m_pos < m_text.size())
            fail(QStringLiteral("unexpected '%1'").arg(m_text.mid(m_pos, 8)));
        return root;
    }

private:
    [[noreturn]] void fail(const QString &why) const
    {
        throw LessonError(QStringLiteral("%1 in '%2'").arg(why, m_text).toStdString());
    }
    void skipSpace()
    {
        while (m_pos < m_text.size() && m_text[m_pos].isSpace())
            ++m_pos;
    }
    bool eat(QChar c)
    {
        skipSpace();
        if (m_pos < m_text.size() && m_text[m_pos] == c) {
            ++m_pos;
            return true;
        }
        return false;
    }
    int add(Expression::Node n)
    {
        if (m_out.m_nodes.size() >= 256)
            fail(QStringLiteral("too long an expression"));
        m_out.m_nodes.push_back(std::move(n));
        return int(m_out.m_nodes.size()) - 1;
    }
    int binary(Expression::Node::Kind k, int a, int b)
    {
        Expression::Node n;
        n.kind = k;
        n.a = a;
        n.b = b;
        return add(n);
    }
    // The left-associative levels, loosest first: a sum of products.
    struct BinaryOp {
        char symbol;
        Expression::Node::Kind kind;
    };
    static constexpr BinaryOp kLevels[][2] = {{{'+', Expression::Node::Add}, {'-', Expression::Node::Sub}},
                                              {{'*', Expression::Node::Mul}, {'/', Expression::Node::Div}}};
    static constexpr int kLevelCount = int(std::size(kLevels));

    int sum() { return level(0); }
    // Operands joined by level `l`'s operators; an operand is the next level,
    // or below the last a power.
    int level(int l)
    {
        const auto operand = [&] { return l + 1 < kLevelCount ? level(l + 1) : power(); };
        int left = operand();
        for (;;) {
            const BinaryOp *op = nullptr;
            for (const BinaryOp &candidate : kLevels[l])
                if (!op && eat(candidate.symbol))
                    op = &candidate;
            if (!op)
                return left;
            left = binary(op->kind, left, operand());
        }
    }
    int power()
    {
        const int base = unary();
        if (eat('^'))
            return binary(Expression::Node::Pow, base, power()); // right-associative
        return base;
    }
    int unary()
    {
        if (eat('-')) {
            Expression::Node n;
            n.kind = Expression::Node::Neg;
            n.a = unary();
            return add(n);
        }
        return atom();
    }
    int atom()
    {
        if (++m_depth > 64)
            fail(QStringLiteral("too deeply nested"));
        skipSpace();
        if (eat('(')) {
            const int inner = sum();
            if (!eat(')'))
                fail(QStringLiteral("missing ')'"));
            --m_depth;
            return inner;
        }
        if (m_pos >= m_text.size())
            fail(QStringLiteral("an expression ends too soon"));
        const QChar c = m_text[m_pos];
        if (c.isDigit() || c == '.') {
            const int start = m_pos;
            while (m_pos < m_text.size() && (m_text[m_pos].isDigit() || m_text[m_pos] == '.'))
                ++m_pos;
            if (m_pos < m_text.size() && (m_text[m_pos] == 'e' || m_text[m_pos] == 'E')) {
                ++m_pos;
                if (m_pos < m_text.size() && (m_text[m_pos] == '-' || m_text[m_pos] == '+'))
                    ++m_pos;
                while (m_pos < m_text.size() && m_text[m_pos].isDigit())
                    ++m_pos;
            }
            bool ok = false;
            Expression::Node n;
            n.value = m_text.mid(start, m_pos - start).toDouble(&ok);
            if (!ok)
                fail(QStringLiteral("bad number '%1'").arg(m_text.mid(start, m_pos - start)));
            --m_depth;
            return add(n);
        }
        if (c.isLetter() || c == '_') {
            const int start = m_pos;
            while (m_pos < m_text.size() &&
                   (m_text[m_pos].isLetterOrNumber() || m_text[m_pos] == '_' || m_text[m_pos] == '.' ||
                    m_text[m_pos] == '@' || m_text[m_pos] == '-'))
                ++m_pos;
            // A '-' belongs to a name only inside it ("micro-batches" is not a
            // name; "a-b" is a subtraction): give trailing and inner dashes back.
            QString word = m_text.mid(start, m_pos - start);
            const int dash = int(word.indexOf('-'));
            if (dash >= 0) {
                m_pos = start + dash;
                word = word.left(dash);
            }
            if (word == QLatin1String("min") || word == QLatin1String("max") || word == QLatin1String("abs")) {
                if (!eat('('))
                    fail(QStringLiteral("%1 needs '('").arg(word));
                Expression::Node n;
                n.kind = word == QLatin1String("min")   ? Expression::Node::Min
                         : word == QLatin1String("max") ? Expression::Node::Max
                                                        : Expression::Node::Abs;
                n.a = sum();
                if (n.kind != Expression::Node::Abs) {
                    if (!eat(','))
                        fail(QStringLiteral("%1 needs two arguments").arg(word));
                    n.b = sum();
                }
                if (!eat(')'))
                    fail(QStringLiteral("missing ')'"));
                --m_depth;
                return add(n);
            }
            Expression::Node n;
            n.kind = Expression::Node::Name;
            n.name = word;
            --m_depth;
            return add(n);
        }
        fail(QStringLiteral("unexpected '%1'").arg(c));
    }

    const QString &m_text;
    Expression &m_out;
    int m_pos = 0;
    int m_depth = 0;
};

Expression Expression::parse(const QString &text)
{
    Expression e;
    e.m_text = text.trimmed();
    if (e.m_text.isEmpty())
        throw LessonError("an empty expression");
    ExpressionParser p(e.m_text, e);
    e.m_root = p.parse();
    return e;
}

double Expression::evaluate(const Lookup &lookup) const
{
    if (m_root < 0)
        throw LessonError("an empty expression");
    return eval(m_root, lookup);
}

double Expression::eval(int i, const Lookup &lookup) const
{
    const Node &n = m_nodes[i];
    switch (n.kind) {
    case Node::Number:
        return n.value;
    case Node::Name: {
        const auto v = lookup(n.name);
        if (!v)
            throw LessonError(QStringLiteral("'%1' is not known here").arg(n.name).toStdString());
        return *v;
    }
    case Node::Neg:
        return -eval(n.a, lookup);
    case Node::Add:
        return eval(n.a, lookup) + eval(n.b, lookup);
    case Node::Sub:
        return eval(n.a, lookup) - eval(n.b, lookup);
    case Node::Mul:
        return eval(n.a, lookup) * eval(n.b, lookup);
    case Node::Div:
        return eval(n.a, lookup) / eval(n.b, lookup);
    case Node::Pow:
        return std::pow(eval(n.a, lookup), eval(n.b, lookup));
    case Node::Min:
        return std::min(eval(n.a, lookup), eval(n.b, lookup));
    case Node::Max:
        return std::max(eval(n.a, lookup), eval(n.b, lookup));
    case Node::Abs:
        return std::abs(eval(n.a, lookup));
    }
    return 0;
}

QStringList Expression::names() const
{
    QStringList out;
    for (const Node &n : m_nodes)
        if (n.kind == Node::Name && !out.contains(n.name))
            out.push_back(n.name);
    return out;
}

} // namespace smol::app
