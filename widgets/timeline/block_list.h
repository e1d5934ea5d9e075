// A sequence held in fixed-size blocks, indexed and binary-searched like a
// vector (random-access iterators), for the timeline's sorted event lists.
// Unlike a vector it can drop a prefix in O(1) per element (whole blocks are
// freed, the rest does not move) and never holds a doubled capacity, so
// bytes() is what the events really take: blocks * kBlockBytes-ish, plus
// the block table. An insert away from the end shifts the elements after
// it, like a vector's.
#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <memory>
#include <vector>

namespace smol::widgets {

template <typename T> class BlockList {
public:
    // Elements per block: a power of two near 16 KiB (256 packets or spans,
    // 2048 prefix sums), so a lane with few events costs a few blocks.
    static constexpr std::size_t kPerBlock = [] {
        std::size_t n = 1;
        while (2 * n * sizeof(T) <= 16384)
            n *= 2;
        return n;
    }();

    class const_iterator {
    public:
        using iterator_category = std::random_access_iterator_tag;
        using value_type = T;
        using difference_type = std::ptrdiff_t;
        using pointer = const T *;
        using reference = const T &;
        const_iterator() = default;
        const_iterator(const BlockList *list, std::size_t i)
            : m_list(list)
            , m_i(i)
        {
        }
        reference operator*() const { return (*m_list)[m_i]; }
        pointer operator->() const { return &(*m_list)[m_i]; }
        reference operator[](difference_type n) const
        {
            return (*m_list)[std::size_t(difference_type(m_i) + n)];
        }
        const_iterator &operator++()
        {
            ++m_i;
            return *this;
        }
        const_iterator operator++(int)
        {
            const_iterator c = *this;
            ++m_i;
            return c;
        }
        const_iterator &operator--()
        {
            --m_i;
            return *this;
        }
        const_iterator operator--(int)
        {
            const_iterator c = *this;
            --m_i;
            return c;
        }
        const_iterator &operator+=(difference_type n)
        {
            m_i = std::size_t(difference_type(m_i) + n);
            return *this;
        }
        const_iterator &operator-=(difference_type n) { return *this += -n; }
        friend const_iterator operator+(const_iterator a, difference_type n) { return a += n; }
        friend const_iterator operator+(difference_type n, const_iterator a) { return a += n; }
        friend const_iterator operator-(const_iterator a, difference_type n) { return a -= n; }
        friend difference_type operator-(const const_iterator &a, const const_iterator &b)
        {
            return difference_type(a.m_i) - difference_type(b.m_i);
        }
        friend bool operator==(const const_iterator &a, const const_iterator &b) { return a.m_i == b.m_i; }
        friend bool operator!=(const const_iterator &a, const const_iterator &b) { return a.m_i != b.m_i; }
        friend bool operator<(const const_iterator &a, const const_iterator &b) { return a.m_i < b.m_i; }
        friend bool operator>(const const_iterator &a, const const_iterator &b) { return a.m_i > b.m_i; }
        friend bool operator<=(const const_iterator &a, const const_iterator &b) { return a.m_i <= b.m_i; }
        friend bool operator>=(const const_iterator &a, const const_iterator &b) { return a.m_i >= b.m_i; }

    private:
        const BlockList *m_list = nullptr;
        std::size_t m_i = 0;
    };

    BlockList() = default;
    BlockList(BlockList &&) noexcept = default;
    BlockList &operator=(BlockList &&) noexcept = default;
    BlockList(const BlockList &o)
        : m_front(o.m_front)
        , m_size(o.m_size)
    {
        for (const auto &b : o.m_blocks) {
            m_blocks.push_back(std::make_unique<T[]>(kPerBlock));
            std::copy(b.get(), b.get() + kPerBlock, m_blocks.back().get());
        }
    }
    BlockList &operator=(const BlockList &o) { return *this = BlockList(o); }

    std::size_t size() const { return m_size; }
    bool empty() const { return m_size == 0; }
    const T &operator[](std::size_t i) const
    {
        const std::size_t k = m_front + i;
        return m_blocks[k / kPerBlock][k % kPerBlock];
    }
    T &operator[](std::size_t i)
    {
        const std::size_t k = m_front + i;
        return m_blocks[k / kPerBlock][k % kPerBlock];
    }
    // Element i and how many follow it in the same block (at least 1 for
    // i < size()): a run to walk with a plain pointer.
    const T *run(std::size_t i, std::size_t &count) const
    {
        const std::size_t k = m_front + i;
        count = std::min(kPerBlock - k % kPerBlock, m_size - i);
        return &m_blocks[k / kPerBlock][k % kPerBlock];
    }
    const T &front() const { return (*this)[0]; }
    const T &back() const { return (*this)[m_size - 1]; }
    const_iterator begin() const { return {this, 0}; }
    const_iterator end() const { return {this, m_size}; }

    // True when it took a new block (the owner's memory grew).
    bool push_back(const T &v)
    {
        const bool grew = m_front + m_size == m_blocks.size() * kPerBlock;
        if (grew)
            m_blocks.push_back(std::make_unique<T[]>(kPerBlock));
        ++m_size;
        (*this)[m_size - 1] = v;
        return grew;
    }
    // Before index `at`: the elements from `at` on move up by one, O(size - at).
    bool insert(std::size_t at, const T &v)
    {
        if (at >= m_size)
            return push_back(v);
        const bool grew = push_back(back());
        for (std::size_t i = m_size - 2; i > at; --i)
            (*this)[i] = (*this)[i - 1];
        (*this)[at] = v;
        return grew;
    }
    // Forgets the first n elements; the blocks they wholly held are freed.
    void dropFront(std::size_t n)
    {
        n = std::min(n, m_size);
        m_front += n;
        m_size -= n;
        const std::size_t freed = m_size == 0 ? m_blocks.size() : m_front / kPerBlock;
        m_blocks.erase(m_blocks.begin(), m_blocks.begin() + std::ptrdiff_t(freed));
        m_front = m_size == 0 ? 0 : m_front - freed * kPerBlock;
        if (m_blocks.capacity() > 2 * m_blocks.size() + 16)
            m_blocks.shrink_to_fit();
    }
    // Keeps the first n elements; the blocks after them are freed.
    void truncate(std::size_t n)
    {
        if (n >= m_size)
            return;
        m_size = n;
        const std::size_t used = m_size == 0 ? 0 : (m_front + m_size - 1) / kPerBlock + 1;
        m_blocks.resize(used);
        if (m_size == 0)
            m_front = 0;
    }
    void clear() { *this = BlockList(); }
    std::size_t bytes() const
    {
        return m_blocks.size() * kPerBlock * sizeof(T) + m_blocks.capacity() * sizeof(std::unique_ptr<T[]>);
    }

private:
    std::vector<std::unique_ptr<T[]>> m_blocks;
    std::size_t m_front = 0; // index of element 0 in the first block
    std::size_t m_size = 0;
};

} // namespace smol::widgets
