//! The item tree the id-addressed drives share (OneDrive, Box, Google Drive): folders and files
//! by id, each with one parent and a name; and their upload sessions, pieces placed by
//! `Content-Range`.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
};

pub(crate) struct Item {
    pub id: String,
    pub name: String,
    pub parent: Option<String>,
    /// None: a folder.
    pub data: Option<Arc<Vec<u8>>>,
    pub mime: String,
    pub version: u64,
}

pub(crate) struct Tree {
    pub root: String,
    items: BTreeMap<String, Item>,
    counter: u64,
    prefix: &'static str,
}

impl Tree {
    /// A tree whose root has `root` as id; new ids are `prefix` + a number.
    pub fn new(root: &str, root_name: &str, prefix: &'static str) -> Self {
        let mut items = BTreeMap::new();
        items.insert(
            root.to_string(),
            Item {
                id: root.to_string(),
                name: root_name.to_string(),
                parent: None,
                data: None,
                mime: "folder".into(),
                version: 1,
            },
        );
        Self {
            root: root.to_string(),
            items,
            counter: 1000,
            prefix,
        }
    }

    pub fn get(&self, id: &str) -> Option<&Item> {
        self.items.get(id)
    }

    pub fn get_mut(&mut self, id: &str) -> Option<&mut Item> {
        self.items.get_mut(id)
    }

    pub fn is_folder(&self, id: &str) -> bool {
        self.items.get(id).is_some_and(|i| i.data.is_none())
    }

    /// The children of a folder, by name.
    pub fn children(&self, parent: &str) -> Vec<&Item> {
        let mut out: Vec<&Item> = self
            .items
            .values()
            .filter(|i| i.parent.as_deref() == Some(parent))
            .collect();
        out.sort_by_key(|i| i.name.to_lowercase());
        out
    }

    pub fn all(&self) -> impl Iterator<Item = &Item> {
        self.items.values().filter(|i| i.parent.is_some())
    }

    /// The child of that name (names compare case-insensitively, as in OneDrive and Box).
    pub fn child(&self, parent: &str, name: &str) -> Option<&Item> {
        let lower = name.to_lowercase();
        self.items
            .values()
            .find(|i| i.parent.as_deref() == Some(parent) && i.name.to_lowercase() == lower)
    }

    /// The item at a path of names from the root.
    pub fn at(&self, segments: &[String]) -> Option<&Item> {
        let mut id = self.root.clone();
        for s in segments {
            id = self.child(&id, s)?.id.clone();
        }
        self.items.get(&id)
    }

    /// The path of names from the root to an item.
    pub fn path_of(&self, id: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut at = self.items.get(id);
        while let Some(i) = at {
            if i.parent.is_none() {
                break;
            }
            out.push(i.name.clone());
            at = i.parent.as_deref().and_then(|p| self.items.get(p));
        }
        out.reverse();
        out
    }

    fn next_id(&mut self) -> String {
        self.counter += 1;
        format!("{}{}", self.prefix, self.counter)
    }

    pub fn add(&mut self, parent: &str, name: &str, data: Option<Vec<u8>>, mime: &str) -> String {
        let id = self.next_id();
        self.items.insert(
            id.clone(),
            Item {
                id: id.clone(),
                name: name.to_string(),
                parent: Some(parent.to_string()),
                data: data.map(Arc::new),
                mime: mime.to_string(),
                version: 1,
            },
        );
        id
    }

    /// The folders of a path, made when missing; answers the last one's id.
    pub fn folders(&mut self, segments: &[String]) -> String {
        let mut id = self.root.clone();
        for s in segments {
            id = match self.child(&id, s) {
                Some(c) => c.id.clone(),
                None => self.add(&id.clone(), s, None, "folder"),
            };
        }
        id
    }

    /// Stores a file's bytes: a new version of `existing`, else a new file.
    pub fn put(&mut self, parent: &str, name: &str, data: Vec<u8>) -> String {
        if let Some(id) = self
            .child(parent, name)
            .filter(|c| c.data.is_some())
            .map(|c| c.id.clone())
        {
            let item = self.items.get_mut(&id).unwrap();
            item.data = Some(Arc::new(data));
            item.version += 1;
            return id;
        }
        self.add(parent, name, Some(data), "application/octet-stream")
    }

    /// Removes an item and everything under it.
    pub fn remove(&mut self, id: &str) -> bool {
        if self.items.remove(id).is_none() {
            return false;
        }
        let under: Vec<String> = self
            .items
            .values()
            .filter(|i| i.parent.as_deref() == Some(id))
            .map(|i| i.id.clone())
            .collect();
        for u in under {
            self.remove(&u);
        }
        true
    }
}

/// An upload session: its bytes so far, the size it will have, and what it becomes.
pub(crate) struct Upload {
    pub data: Vec<u8>,
    pub total: Option<u64>,
    pub target: serde_json::Value,
}

#[derive(Default)]
pub(crate) struct Uploads {
    pub open: HashMap<String, Upload>,
    counter: u64,
}

impl Uploads {
    pub fn start(&mut self, total: Option<u64>, target: serde_json::Value) -> String {
        self.counter += 1;
        let id = format!("up{:06}", self.counter);
        self.open.insert(
            id.clone(),
            Upload {
                data: Vec::new(),
                total,
                target,
            },
        );
        id
    }
}

/// `bytes FIRST-LAST/TOTAL` (or `bytes */TOTAL`): (first, last, total).
pub(crate) fn content_range(v: &str) -> Option<(Option<(u64, u64)>, u64)> {
    let r = v.trim().strip_prefix("bytes ")?;
    let (span, total) = r.split_once('/')?;
    let total = total.trim().parse().ok()?;
    if span.trim() == "*" {
        return Some((None, total));
    }
    let (a, b) = span.split_once('-')?;
    Some((
        Some((a.trim().parse().ok()?, b.trim().parse().ok()?)),
        total,
    ))
}
