//! A parallel directory walk for FA_fast_find and FA_grep. Directories are shared through one
//! queue; each thread reads whole directories and keeps what it finds in its own state, so the
//! only contention is one lock per directory. Symlinks are never followed (an entry's type comes
//! from the directory listing itself), so nothing found can lie outside the walked root.

use std::{
    fs::{DirEntry, FileType},
    path::{Path, PathBuf},
    sync::{
        Condvar, Mutex,
        atomic::{AtomicBool, Ordering},
    },
};

/// What a visitor wants after one entry.
pub(crate) enum Flow {
    Continue,
    /// Stop the whole walk (a limit was reached).
    Quit,
}

struct Queue {
    dirs: Vec<PathBuf>,
    /// Threads currently reading a directory (they may still add more).
    active: usize,
}

/// Walks everything below `root` on `threads` threads. `visit` sees every entry (files,
/// directories, links) with its type; `stop` is polled between directories. Returns each
/// thread's state.
pub(crate) fn par_walk<S, M, V>(
    root: &Path,
    threads: usize,
    stop: &(dyn Fn() -> bool + Sync),
    make: M,
    visit: V,
) -> Vec<S>
where
    S: Send,
    M: Fn() -> S + Sync,
    V: Fn(&mut S, &DirEntry, FileType) -> Flow + Sync,
{
    let queue = Mutex::new(Queue {
        dirs: vec![root.to_path_buf()],
        active: 0,
    });
    let ready = Condvar::new();
    let quit = AtomicBool::new(false);
    let threads = threads.max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (queue, ready, quit, make, visit) = (&queue, &ready, &quit, &make, &visit);
                scope.spawn(move || {
                    let mut state = make();
                    let mut found = Vec::new();
                    loop {
                        let dir = {
                            let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
                            loop {
                                if quit.load(Ordering::Relaxed) {
                                    return state;
                                }
                                if let Some(d) = q.dirs.pop() {
                                    q.active += 1;
                                    break d;
                                }
                                if q.active == 0 {
                                    ready.notify_all();
                                    return state;
                                }
                                q = ready.wait(q).unwrap_or_else(|p| p.into_inner());
                            }
                        };
                        if stop() {
                            quit.store(true, Ordering::Relaxed);
                        }
                        if !quit.load(Ordering::Relaxed) {
                            // An unreadable directory below the root is skipped, as find skips it.
                            if let Ok(entries) = std::fs::read_dir(&dir) {
                                for entry in entries.flatten() {
                                    let Ok(ft) = entry.file_type() else { continue };
                                    if ft.is_dir() {
                                        found.push(entry.path());
                                    }
                                    if let Flow::Quit = visit(&mut state, &entry, ft) {
                                        quit.store(true, Ordering::Relaxed);
                                        break;
                                    }
                                }
                            }
                        }
                        let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
                        q.active -= 1;
                        let added = !found.is_empty();
                        q.dirs.append(&mut found);
                        if added || q.active == 0 || quit.load(Ordering::Relaxed) {
                            ready.notify_all();
                        }
                    }
                })
            })
            .collect();
        workers.into_iter().filter_map(|w| w.join().ok()).collect()
    })
}

/// How many walker threads: the machine's parallelism, at most 8.
pub(crate) fn threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .min(8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_is_seen_once_and_links_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        for a in 0..20 {
            for b in 0..5 {
                let d = dir.path().join(format!("d{a}/e{b}"));
                std::fs::create_dir_all(&d).unwrap();
                for c in 0..7 {
                    std::fs::write(d.join(format!("f{c}")), "").unwrap();
                }
            }
        }
        std::os::unix::fs::symlink(dir.path(), dir.path().join("loop")).unwrap();
        for threads in [1, 2, 4] {
            let states = par_walk(
                dir.path(),
                threads,
                &|| false,
                Vec::new,
                |s: &mut Vec<PathBuf>, e, ft| {
                    if ft.is_file() {
                        s.push(e.path());
                    }
                    Flow::Continue
                },
            );
            let mut all: Vec<PathBuf> = states.into_iter().flatten().collect();
            all.sort();
            all.dedup();
            assert_eq!(all.len(), 20 * 5 * 7, "threads {threads}");
        }
        let quit = par_walk(
            dir.path(),
            2,
            &|| false,
            || 0usize,
            |n: &mut usize, _, _| {
                *n += 1;
                if *n >= 3 { Flow::Quit } else { Flow::Continue }
            },
        );
        assert!(quit.iter().sum::<usize>() < 100);
    }
}
