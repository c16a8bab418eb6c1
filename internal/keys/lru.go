package keys

import "container/list"

// lru is a fixed-size least-recently-used map. It is not safe for concurrent
// use; Keyring guards it.
type lru[K comparable, V any] struct {
	max   int
	order *list.List
	items map[K]*list.Element
}

type entry[K comparable, V any] struct {
	k K
	v V
}

func newLRU[K comparable, V any](max int) *lru[K, V] {
	return &lru[K, V]{max: max, order: list.New(), items: make(map[K]*list.Element)}
}

func (l *lru[K, V]) get(k K) (V, bool) {
	if e, ok := l.items[k]; ok {
		l.order.MoveToFront(e)
		return e.Value.(*entry[K, V]).v, true
	}
	var zero V
	return zero, false
}

func (l *lru[K, V]) put(k K, v V) {
	if e, ok := l.items[k]; ok {
		e.Value.(*entry[K, V]).v = v
		l.order.MoveToFront(e)
		return
	}
	l.items[k] = l.order.PushFront(&entry[K, V]{k, v})
	for l.order.Len() > l.max {
		last := l.order.Back()
		l.order.Remove(last)
		delete(l.items, last.Value.(*entry[K, V]).k)
	}
}

// removeIf removes every entry for which drop returns true.
func (l *lru[K, V]) removeIf(drop func(K, V) bool) {
	for e := l.order.Front(); e != nil; {
		next := e.Next()
		if en := e.Value.(*entry[K, V]); drop(en.k, en.v) {
			l.order.Remove(e)
			delete(l.items, en.k)
		}
		e = next
	}
}

func (l *lru[K, V]) purge() {
	l.order.Init()
	clear(l.items)
}

func (l *lru[K, V]) len() int { return l.order.Len() }
