//! A partitioned context model over a sequence of symbols (Kroeger & Long's predictor of file
//! accesses, applied here to application launches): a trie of the contexts of order 0 to `m`
//! seen in the sequence, each node counting which symbol followed it, with a bounded number of
//! children per node (the partition limit) and counts that fade geometrically per update.
//!
//! Owns the trie, its decay and its blended next-symbol distribution. It knows nothing about
//! applications or time. Pure.

use std::collections::BTreeMap;

/// A symbol of the sequence (an interned application, or a session-start marker).
pub type Symbol = u32;

#[derive(Clone, Debug, Default)]
struct Node {
    /// Decayed number of times this context was followed by anything.
    count: f64,
    /// Decayed counts of what followed.
    children: BTreeMap<Symbol, f64>,
    /// Update number at which `count` and `children` were last brought up to date.
    stamp: u64,
}

/// One order's view of the next symbol, for explanations.
#[derive(Clone, Debug, PartialEq)]
pub struct OrderEvidence {
    /// Context length (0 = no context).
    pub order: usize,
    /// The context, oldest first.
    pub context: Vec<Symbol>,
    /// Decayed number of times the context was seen.
    pub seen: f64,
    /// Decayed count of the queried symbol after it.
    pub followed_by: f64,
    /// Weight this order gets over the lower orders' blend.
    pub weight: f64,
}

/// The partitioned context model.
#[derive(Clone, Debug)]
pub struct ContextModel {
    max_order: usize,
    partition: usize,
    decay: f64,
    updates: u64,
    nodes: BTreeMap<Vec<Symbol>, Node>,
}

impl ContextModel {
    /// A model of contexts up to `max_order` symbols, at most `partition` successors kept per
    /// context, counts multiplied by `decay` (in `(0, 1]`) at every update.
    pub fn new(max_order: usize, partition: usize, decay: f64) -> Self {
        ContextModel { max_order, partition: partition.max(1), decay: decay.clamp(1e-6, 1.0), updates: 0, nodes: BTreeMap::new() }
    }

    /// Highest context order.
    pub fn max_order(&self) -> usize {
        self.max_order
    }

    fn factor(&self, stamp: u64) -> f64 {
        if self.decay >= 1.0 { 1.0 } else { self.decay.powf((self.updates - stamp) as f64) }
    }

    /// Records that `next` followed `history` (oldest first; only its last `max_order` symbols
    /// are used).
    pub fn update(&mut self, history: &[Symbol], next: Symbol) {
        self.updates += 1;
        let longest = history.len().min(self.max_order);
        for k in 0..=longest {
            let context = history[history.len() - k..].to_vec();
            let f = {
                let stamp = self.nodes.get(&context).map_or(self.updates, |n| n.stamp);
                self.factor(stamp)
            };
            let partition = self.partition;
            let node = self.nodes.entry(context).or_default();
            if f < 1.0 {
                node.count *= f;
                for c in node.children.values_mut() {
                    *c *= f;
                }
                node.children.retain(|_, c| *c > 1e-9);
            }
            node.stamp = self.updates;
            node.count += 1.0;
            *node.children.entry(next).or_default() += 1.0;
            if node.children.len() > partition {
                // The partition is full: forget the weakest successor (ties: the highest symbol).
                let weakest = node
                    .children
                    .iter()
                    .filter(|(s, _)| **s != next)
                    .min_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(a.0)))
                    .map(|(s, _)| *s);
                if let Some(s) = weakest {
                    node.children.remove(&s);
                }
            }
        }
    }

    /// Decayed (seen, successor counts) of a context, if it was ever seen.
    fn node(&self, context: &[Symbol]) -> Option<(f64, BTreeMap<Symbol, f64>)> {
        let n = self.nodes.get(context)?;
        let f = self.factor(n.stamp);
        Some((n.count * f, n.children.iter().map(|(s, c)| (*s, c * f)).collect()))
    }

    /// The blended distribution of the next symbol over `alphabet` after `history`: order 0
    /// (with add-`prior` smoothing), then each longer context interpolated over it with weight
    /// `seen / (seen + distinct successors)` (Witten–Bell). Orders above `use_order` are ignored.
    /// `alphabet` is sorted ascending; the answer is aligned with it. Linear in the alphabet: a
    /// context's successors (at most the partition) are added to a common scale rather than every
    /// symbol being blended at every order.
    pub fn distribution(&self, history: &[Symbol], alphabet: &[Symbol], use_order: usize, prior: f64) -> Vec<f64> {
        debug_assert!(alphabet.windows(2).all(|w| w[0] < w[1]), "the alphabet is sorted");
        let mut q = vec![0.0; alphabet.len()];
        let root = self.nodes.get(&[][..]);
        let (n0, f0) = root.map_or((0.0, 1.0), |n| {
            let f = self.factor(n.stamp);
            (n.count * f, f)
        });
        let denom = n0 + prior * alphabet.len() as f64;
        if denom > 0.0 {
            q.fill(prior / denom);
            for (s, c) in root.map(|n| &n.children).into_iter().flatten() {
                if let Ok(i) = alphabet.binary_search(s) {
                    q[i] = (c * f0 + prior) / denom;
                }
            }
        } else {
            q.fill(1.0 / alphabet.len().max(1) as f64);
        }
        // Every value is `scale` times what `q` holds: blending order k multiplies all by
        // (1 − λ) through `scale` and adds λ·count/seen to its successors only.
        let mut scale = 1.0;
        let longest = history.len().min(self.max_order).min(use_order);
        for k in 1..=longest {
            let context = &history[history.len() - k..];
            let Some(node) = self.nodes.get(context) else { break };
            let f = self.factor(node.stamp);
            let n = node.count * f;
            if n <= 0.0 || node.children.is_empty() {
                break;
            }
            let lambda = n / (n + node.children.len() as f64);
            scale *= 1.0 - lambda;
            for (s, c) in &node.children {
                if let Ok(i) = alphabet.binary_search(s) {
                    q[i] += lambda * (c * f / n) / scale;
                }
            }
        }
        for v in &mut q {
            *v *= scale;
        }
        q
    }

    /// What each order says about `symbol` after `history`.
    pub fn evidence(&self, history: &[Symbol], symbol: Symbol, use_order: usize) -> Vec<OrderEvidence> {
        let mut out = Vec::new();
        let longest = history.len().min(self.max_order).min(use_order);
        for k in 0..=longest {
            let context = &history[history.len() - k..];
            let Some((n, children)) = self.node(context) else { break };
            let weight = if k == 0 { 1.0 } else { n / (n + children.len().max(1) as f64) };
            out.push(OrderEvidence {
                order: k,
                context: context.to_vec(),
                seen: n,
                followed_by: children.get(&symbol).copied().unwrap_or(0.0),
                weight,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_order_context_dominates_when_consistent() {
        let mut m = ContextModel::new(2, 8, 1.0);
        // a b c a b c ...: after b always c.
        let seq = [0u32, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1];
        for i in 1..seq.len() {
            m.update(&seq[..i], seq[i]);
        }
        let q = m.distribution(&seq, &[0, 1, 2], 2, 0.5);
        assert!(q[2] > 0.8, "{q:?}");
        let total: f64 = q.iter().sum();
        assert!((total - 1.0).abs() < 1e-9);
        // Order 0 alone is close to uniform.
        let q0 = m.distribution(&seq, &[0, 1, 2], 0, 0.5);
        assert!(q0[2] < 0.4);
    }

    #[test]
    fn decay_lets_new_habits_win() {
        let mut m = ContextModel::new(1, 8, 0.9);
        for _ in 0..50 {
            m.update(&[7], 1);
        }
        for _ in 0..10 {
            m.update(&[7], 2);
        }
        let q = m.distribution(&[7], &[1, 2], 1, 0.1);
        assert!(q[1] > q[0], "{q:?}");
        let mut flat = ContextModel::new(1, 8, 1.0);
        for _ in 0..50 {
            flat.update(&[7], 1);
        }
        for _ in 0..10 {
            flat.update(&[7], 2);
        }
        let q = flat.distribution(&[7], &[1, 2], 1, 0.1);
        assert!(q[0] > q[1]);
    }

    #[test]
    fn partition_limits_successors() {
        let mut m = ContextModel::new(1, 2, 1.0);
        m.update(&[9], 1);
        m.update(&[9], 1);
        m.update(&[9], 2);
        m.update(&[9], 3);
        let (_, children) = m.node(&[9]).unwrap();
        assert_eq!(children.len(), 2);
        assert!(children.contains_key(&1) && children.contains_key(&3));
        assert_eq!(m.evidence(&[9], 1, 1).len(), 2);
    }
}
