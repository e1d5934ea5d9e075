// The small arithmetic a lesson's measures and formulas are written in
// (docs/lessons.md): numbers, names of measured and configured values,
// + - * / ^, unary minus, parentheses, min, max, abs. Qt Core only.
#pragma once

#include <QString>
#include <QStringList>
#include <QVector>

#include <functional>
#include <optional>
#include <stdexcept>

namespace smol::app {

// Every error of the lesson format: the parser's carry "FILE:LINE: FIELD:".
class LessonError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// An arithmetic expression over named values: numbers, identifiers
// (`bytes_per_step`, `ddp.samples_per_s`, `idle_share@2`, `N`), + - * / ^,
// unary minus, parentheses, min(a, b), max(a, b), abs(a).
class Expression {
public:
    Expression() = default;
    // Throws LessonError with the reason (no line: the parser adds it).
    static Expression parse(const QString &text);
    // An unknown name: std::nullopt from `lookup` -> LessonError naming it.
    using Lookup = std::function<std::optional<double>(const QString &name)>;
    double evaluate(const Lookup &lookup) const;
    QStringList names() const; // every identifier it uses, once each
    QString text() const { return m_text; }
    bool isEmpty() const { return m_nodes.isEmpty(); }

private:
    struct Node {
        enum Kind { Number, Name, Neg, Add, Sub, Mul, Div, Pow, Min, Max, Abs } kind = Number;
        double value = 0;
        QString name;
        int a = -1, b = -1; // operand nodes
    };
    friend class ExpressionParser;
    double eval(int node, const Lookup &lookup) const;
    QVector<Node> m_nodes;
    int m_root = -1;
    QString m_text;
};

} // namespace smol::app
