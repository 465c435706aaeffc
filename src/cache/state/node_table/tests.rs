use super::*;

/// A fresh record for `name`, with the index `t` gives it, as the state
/// builds one.
fn record(t: &NodeTable, name: &str) -> Arc<NodeInfo> {
    let mut n = NodeInfo::new(name, Vec::<(String, String)>::new());
    n.index = NodeIndex::at(t.index_for(name));
    Arc::new(n)
}

fn add(t: &mut NodeTable, name: &str) -> Option<Arc<NodeInfo>> {
    let n = record(t, name);
    t.insert(n)
}

fn index(t: &NodeTable, name: &str) -> usize {
    t.get_indexed(name).map(|(i, _)| i).unwrap()
}

fn pod(cpu: i64) -> PodInfo {
    PodInfo {
        spec: Arc::new(crate::objects::pod::PodSpecInfo {
            requests: Resources {
                milli_cpu: cpu,
                ..Default::default()
            },
            counted: Resources {
                milli_cpu: cpu,
                ..Default::default()
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn cpu(u: Option<&NodeUsage>) -> Option<i64> {
    u.map(|u| u.requested.milli_cpu)
}

#[test]
fn indexes_are_distinct_kept_on_update_and_reused_after_delete() {
    let mut t = NodeTable::default();
    for n in ["a", "b", "c"] {
        assert!(add(&mut t, n).is_none());
    }
    let mut all: Vec<usize> = ["a", "b", "c"].iter().map(|n| index(&t, n)).collect();
    all.sort_unstable();
    assert_eq!(all, [0, 1, 2]);
    assert_eq!(t.index_bound(), 3);

    let b = index(&t, "b");
    let old = add(&mut t, "b");
    assert!(old.is_some(), "an update returns the old record");
    assert_eq!(index(&t, "b"), b, "an update keeps the index");

    assert!(t.remove("b").is_some());
    assert!(t.get("b").is_none() && t.get_indexed("b").is_none());
    assert!(add(&mut t, "d").is_none());
    assert_eq!(index(&t, "d"), b, "a new node takes the freed index");
    assert_eq!(t.index_bound(), 3);
    assert!(add(&mut t, "e").is_none());
    assert_eq!(index(&t, "e"), 3);
    assert_eq!((t.len(), t.index_bound()), (4, 4));
    assert!(t.remove("zz").is_none());
    for n in t.values() {
        assert_eq!(n.index.get(), Some(index(&t, &n.name) as u32));
    }
}

#[test]
fn a_node_taking_a_freed_index_never_reads_the_old_nodes_usage() {
    let mut t = NodeTable::default();
    add(&mut t, "a");
    t.count_pod("a", &pod(300));
    let a = t.get("a").unwrap().clone();
    assert_eq!(cpu(t.usage_of(&a)), Some(300));

    assert!(t.remove("a").is_some());
    add(&mut t, "b");
    let b = t.get("b").unwrap().clone();
    assert_eq!(b.index.get(), a.index.get(), "b took a's index");
    assert_eq!(cpu(t.usage_of(&b)), None, "b has no pods");
    assert_eq!(
        cpu(t.usage_of(&a)),
        Some(300),
        "a stale record of a reads a's usage, kept while a is away"
    );
    // A record the table does not hold (a copy, a decoded one) carrying an
    // index another node has reads its own name's usage.
    let copy = Arc::new(NodeInfo {
        name: "c".into(),
        ..(*b).clone()
    });
    t.count_pod("c", &pod(50));
    assert_eq!(cpu(t.usage_of(&copy)), Some(50));

    t.count_pod("b", &pod(100));
    assert_eq!(cpu(t.usage_of(&b)), Some(100));
    add(&mut t, "a");
    let a = t.get("a").unwrap().clone();
    assert_eq!(cpu(t.usage_of(&a)), Some(300), "a's pods count again");
    assert_eq!(cpu(t.usage("b")), Some(100));
    t.uncount_pod("a", &pod(300));
    assert_eq!(cpu(t.usage_of(&a)), None, "a node without pods reads empty");
    t.uncount_pod("c", &pod(50));
    assert!(t.usage("c").is_none());
}

#[test]
fn a_record_goes_in_at_the_index_it_carries() {
    // What a replica does with records of the shared state: indexes it
    // never handed out, some held here by nodes deleted there.
    let mut t = NodeTable::default();
    add(&mut t, "a");
    add(&mut t, "b");
    t.count_pod("a", &pod(100));
    let at = |name: &str, index: u32| {
        let mut n = NodeInfo::new(name, Vec::<(String, String)>::new());
        n.index = NodeIndex::at(index);
        Arc::new(n)
    };
    assert_eq!(t.displaced_by("c", 5), Vec::<String>::new());
    assert!(t.insert(at("c", 5)).is_none());
    assert_eq!((index(&t, "c"), t.index_bound()), (5, 6));
    assert_eq!(t.displaced_by("d", 0), ["a"]);
    assert_eq!(t.displaced_by("a", 1), ["b", "a"]);
    let d = at("d", 0);
    t.insert(d.clone());
    assert!(t.get("a").is_none(), "a held d's index");
    assert_eq!(cpu(t.usage("a")), Some(100), "a's usage waits for it");
    assert_eq!(cpu(t.usage_of(&d)), None);
    // The indexes skipped on the way to 5 are free and handed out.
    let mut fresh: Vec<u32> = Vec::new();
    for n in ["e", "f", "g", "h"] {
        fresh.push(t.index_for(n));
        add(&mut t, n);
    }
    fresh.sort_unstable();
    assert_eq!(fresh, [2, 3, 4, 6]);
    assert_eq!(t.len(), 7);
}

#[test]
fn names_on_both_sides_of_the_inline_length_are_found_and_told_apart() {
    let names: Vec<String> = [INLINE_NAME - 1, INLINE_NAME, INLINE_NAME + 1, 300]
        .into_iter()
        .flat_map(|len| ["a".repeat(len), format!("{}b", "a".repeat(len - 1))])
        .chain([String::new(), "ü".repeat(30)])
        .collect();
    let mut t = NodeTable::default();
    for n in &names {
        add(&mut t, n);
    }
    assert_eq!(t.len(), names.len());
    for n in &names {
        assert_eq!(t.get(n).map(|r| r.name.as_str()), Some(n.as_str()));
    }
    assert!(t.get(&"a".repeat(INLINE_NAME + 2)).is_none());
    assert!(t.get(&"a".repeat(INLINE_NAME - 2)).is_none());
    for n in &names {
        assert!(t.remove(n).is_some(), "{n} removes");
    }
    assert_eq!(t.len(), 0);
}

/// The name lookup (open addressing, entries shifted back on removal)
/// against a map, through inserts and removals that reuse indexes and grow
/// the table, with names that do and do not fit in the row.
#[test]
fn lookups_agree_with_a_map_through_inserts_and_removals() {
    let pool: Vec<String> = (0..300)
        .map(|i| match i % 3 {
            0 => format!("n{i}"),
            1 => format!("ip-10-0-{i}-36.us-east-1.compute.internal"),
            _ => format!("a-node-name-longer-than-forty-six-bytes-of-row-{i}"),
        })
        .collect();
    let mut t = NodeTable::default();
    let mut model: HashMap<&str, usize> = HashMap::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let unknown = ["", "n", "ip-10-0-1-36", "nobody"];
    for step in 0..4000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let name = pool[(x % pool.len() as u64) as usize].as_str();
        if model.contains_key(name) {
            assert!(t.remove(name).is_some(), "{name} at step {step}");
            model.remove(name);
        } else {
            assert!(add(&mut t, name).is_none());
            model.insert(name, index(&t, name));
        }
        if step % 97 == 0 {
            assert_eq!(t.len(), model.len());
            let asked: Vec<&str> = pool.iter().map(String::as_str).chain(unknown).collect();
            let mut each = Vec::new();
            t.get_indexed_each(&asked, |name, found| {
                each.push((*name, found.map(|(i, n)| (i, n.name.clone()))));
            });
            for (name, found) in each {
                let want = model.get(name).map(|&i| (i, name.to_owned()));
                assert_eq!(found, want, "{name} at step {step}");
                assert_eq!(t.get_indexed(name).map(|(i, _)| i), want.map(|(i, _)| i));
            }
        }
    }
}

#[test]
fn an_empty_table_finds_nothing() {
    let t = NodeTable::default();
    let mut seen = 0;
    t.get_indexed_each(&["a", "b"], |_, found| {
        assert!(found.is_none());
        seen += 1;
    });
    assert_eq!(seen, 2);
    assert!(t.get("a").is_none());
}
