//! Who may learn page-cache state from the daemon.
//!
//! Residency is a side channel (CVE-2019-5489: the kernel stopped `mincore`
//! and `cachestat` from answering for files the caller neither owns nor may
//! write). The daemon can check any file, so it must not become the oracle
//! the kernel closed: it reveals residency (CHECK's answer, the RESIDENT,
//! READ and JOINED flags and `bytes_read` of FETCH) only to a peer that could
//! learn it anyway, or that the operator trusts:
//!
//! * the peer is root, or its uid, primary gid or one of its supplementary
//!   groups (SO_PEERGROUPS) is in `--trust-uid` / `--trust-gid`;
//! * the peer owns the file (its uid is the file's owner);
//! * the passed descriptor is open for writing (the kernel's own rule:
//!   `cachestat` answers for a writable file description).
//!
//! Everyone else is served by fetching, with replies that say nothing about
//! what was resident: CHECK answers "not resident", FETCH answers status 0
//! with no flags and `bytes_read` 0. Credentials are taken once, at accept
//! (SO_PEERCRED describes the process that connected, not later holders of
//! the socket, which is what the kernel's own checks would use too).

/// The operator's trust lists.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    pub uids: Vec<u32>,
    pub gids: Vec<u32>,
}

impl Trust {
    /// Whether a peer with these credentials may learn any file's residency.
    pub fn trusts(&self, uid: u32, gid: u32, groups: &[u32]) -> bool {
        uid == 0 || self.uids.contains(&uid) || self.gids.contains(&gid) || groups.iter().any(|g| self.gids.contains(g))
    }
}

/// Whether residency of a file may be revealed to a peer: it is trusted, it
/// owns the file, or its descriptor is open for writing (`open_flags` from
/// F_GETFL).
pub fn may_learn(trusted: bool, peer_uid: u32, file_uid: u32, open_flags: i32) -> bool {
    trusted || peer_uid == file_uid || matches!(open_flags & libc::O_ACCMODE, libc::O_WRONLY | libc::O_RDWR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_listed_peers_are_trusted_others_not() {
        let t = Trust { uids: vec![33], gids: vec![1001] };
        assert!(t.trusts(0, 0, &[]));
        assert!(t.trusts(33, 33, &[]));
        assert!(t.trusts(1000, 1001, &[]));
        assert!(t.trusts(1000, 1000, &[5, 1001]));
        assert!(!t.trusts(1000, 1000, &[5]));
        assert!(!Trust::default().trusts(33, 33, &[33]));
    }

    #[test]
    fn owners_and_writers_may_learn_readers_of_foreign_files_may_not() {
        assert!(may_learn(true, 1000, 0, libc::O_RDONLY));
        assert!(may_learn(false, 1000, 1000, libc::O_RDONLY));
        assert!(may_learn(false, 1000, 0, libc::O_RDWR));
        assert!(may_learn(false, 1000, 0, libc::O_WRONLY | libc::O_APPEND));
        assert!(!may_learn(false, 1000, 0, libc::O_RDONLY | libc::O_NONBLOCK));
    }
}
