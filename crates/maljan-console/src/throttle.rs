//! Failed logins back off per client: a few wrong guesses are free, then each further one locks
//! that client out for twice as long as the last (1 s, 2 s, 4 s, … up to 15 minutes). While it
//! is locked out a login is refused with 429 before the password is even looked at, so guessing
//! runs at a handful a minute instead of as fast as argon2 allows. A success forgets the
//! client; an hour without a failure does too.
//!
//! A client is its IP address (an IPv6 client its /64: one host usually holds a whole /64).

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::Mutex,
    time::{Duration, Instant},
};

/// Failures allowed before the first lockout.
const FREE_FAILURES: u32 = 3;
const FIRST_LOCKOUT: Duration = Duration::from_secs(1);
const LONGEST_LOCKOUT: Duration = Duration::from_secs(15 * 60);
/// A client with no failure for this long starts afresh.
const FORGET_AFTER: Duration = Duration::from_secs(3600);
/// The most clients remembered; beyond it the one idle longest is forgotten.
const MAX_CLIENTS: usize = 10_000;

#[derive(Debug, Clone, Copy)]
struct Strikes {
    failures: u32,
    last: Instant,
    locked_until: Option<Instant>,
}

/// The login back-off of every client (see the module's comment).
#[derive(Default)]
pub struct LoginThrottle {
    clients: Mutex<HashMap<IpAddr, Strikes>>,
}

/// The key of a client: its address, an IPv6 one cut to its /64. `None` (no peer address, as
/// in a request sent to the router in process) is one shared client.
fn key(client: Option<IpAddr>) -> IpAddr {
    match client {
        Some(IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut seg = v6.segments();
                seg[4..].fill(0);
                IpAddr::V6(seg.into())
            }
        },
        Some(v4) => v4,
        None => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
    }
}

fn lockout(failures: u32) -> Option<Duration> {
    let over = failures.checked_sub(FREE_FAILURES)?;
    let factor = 1u32.checked_shl(over.min(20)).unwrap_or(u32::MAX);
    Some(FIRST_LOCKOUT.saturating_mul(factor).min(LONGEST_LOCKOUT))
}

impl LoginThrottle {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Strikes>> {
        self.clients.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `client` may try to log in now; else how long it has to wait.
    pub fn check(&self, client: Option<IpAddr>) -> Result<(), Duration> {
        let now = Instant::now();
        match self.lock().get(&key(client)).and_then(|s| s.locked_until) {
            Some(until) if until > now => Err(until - now),
            _ => Ok(()),
        }
    }

    /// Records a failed login; returns how long `client` is now locked out, if it is.
    pub fn failed(&self, client: Option<IpAddr>) -> Option<Duration> {
        let now = Instant::now();
        let mut clients = self.lock();
        if clients.len() >= MAX_CLIENTS {
            clients.retain(|_, s| now.duration_since(s.last) < FORGET_AFTER);
            if clients.len() >= MAX_CLIENTS
                && let Some(oldest) = clients.iter().min_by_key(|(_, s)| s.last).map(|(k, _)| *k)
            {
                clients.remove(&oldest);
            }
        }
        let strikes = clients.entry(key(client)).or_insert(Strikes {
            failures: 0,
            last: now,
            locked_until: None,
        });
        if now.duration_since(strikes.last) >= FORGET_AFTER {
            strikes.failures = 0;
        }
        strikes.failures = strikes.failures.saturating_add(1);
        strikes.last = now;
        let wait = lockout(strikes.failures);
        strikes.locked_until = wait.map(|w| now + w);
        wait
    }

    /// A successful login: the client starts afresh.
    pub fn succeeded(&self, client: Option<IpAddr>) {
        self.lock().remove(&key(client));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn a_few_failures_are_free_then_the_lockout_doubles() {
        let t = LoginThrottle::default();
        for _ in 0..FREE_FAILURES - 1 {
            assert_eq!(t.failed(ip("10.0.0.1")), None);
            assert!(t.check(ip("10.0.0.1")).is_ok());
        }
        assert_eq!(t.failed(ip("10.0.0.1")), Some(Duration::from_secs(1)));
        assert!(t.check(ip("10.0.0.1")).is_err(), "locked out");
        assert!(t.check(ip("10.0.0.2")).is_ok(), "another client is not");
        assert_eq!(t.failed(ip("10.0.0.1")), Some(Duration::from_secs(2)));
        assert_eq!(t.failed(ip("10.0.0.1")), Some(Duration::from_secs(4)));
        t.succeeded(ip("10.0.0.1"));
        assert!(t.check(ip("10.0.0.1")).is_ok());
        assert_eq!(lockout(100), Some(LONGEST_LOCKOUT));
    }

    #[test]
    fn an_ipv6_client_is_its_slash_64() {
        let t = LoginThrottle::default();
        for _ in 0..FREE_FAILURES {
            t.failed(ip("2001:db8:1:2::1"));
        }
        assert!(t.check(ip("2001:db8:1:2:ffff::9")).is_err());
        assert!(t.check(ip("2001:db8:1:3::1")).is_ok());
        for _ in 0..FREE_FAILURES {
            t.failed(ip("::ffff:192.0.2.1"));
        }
        assert!(
            t.check(ip("192.0.2.1")).is_err(),
            "v4-mapped is the v4 client"
        );
    }
}
