//! The instance store: finished stage instances (frame and artifacts) by store key, so a run
//! computes only what no earlier run — of this pipeline or another — already computed.
//!
//! An entry is a line of JSON (what it holds, the sizes of its parts and the sha256 of the
//! rest), then the frame ([`crate::frames::encode`], or Parquet) and the artifacts' bytes.
//! Under the store root:
//! - `objects/<k0k1>/<key>`: one file per entry of at least [`SMALL`] bytes;
//! - `packs/<name>.pack` (+ `<name>.idx`): smaller entries, many per file. A file per tiny
//!   entry cost 0.1 ms of kernel time (create, write, rename): a sweep of 10⁶ trivial
//!   instances spent minutes there. A process appends each small entry to its open pack as
//!   the instance finishes, in one `write`, preceded by a header (a magic, the key, the
//!   length); when the pack holds [`PACK_BYTES`] or [`PACK_ENTRIES`], and at the end of the
//!   run, it writes the pack's index (key, offset, length) beside it. A pack without an index
//!   (its writer still running, or killed) is read by its headers, so an entry is in the
//!   store the moment its `write` returns: a kill, even `kill -9`, loses no finished instance.
//!   An entry a kill cut short fails its header's length or its sha256 and is a miss.
//!
//! Every other file is written under a unique name in `tmp/` and renamed into place, so a
//! reader sees a whole file or none; a killed writer leaves only a file in `tmp/`; two processes
//! storing one key at once (also over NFS, where rename is atomic too) leave two complete
//! copies at worst, and since the key fixes the output their frames and artifacts are the
//! same (only when each was computed differs, [`Made`]). Nothing is
//! fsynced (a cache): a reader checks each entry's sha256, so an entry a crash left short or
//! garbled is a miss, and is replaced when the instance runs again.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use anyhow::{Context, Result};
use polars::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::key::Key;
use crate::kind::Artifact;

/// What one instance produced.
pub struct InstanceResult {
    pub frame: DataFrame,
    pub artifacts: Vec<Artifact>,
    /// Compute time in this run (0 when it came from the store).
    pub seconds: f64,
    /// sha256 of the frame as stored ([`frame_digest`]): what a reader's key by content is
    /// made of ([`super::key::content_key`]). Known once the result is stored or read from
    /// the store; `None` before.
    pub digest: Option<[u8; 32]>,
    /// When, by which build and in how long it was computed: `None` for a result computed
    /// by this run (until stored), what its entry says for one taken from the store.
    pub made: Option<Made>,
}

/// When, by which build and in how long a stored instance was computed, so a number taken
/// from the store can be traced months later (the manifest and the report show it for
/// instances a run did not compute). In the entry's JSON line, outside its sha256: two
/// processes that store one key store the same frame and artifacts (the key fixes them)
/// and differ only here.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Made {
    /// Seconds since the Unix epoch.
    pub at: u64,
    /// The build: its version, then the first 12 hex digits of its commit and of its
    /// executable's sha256 ([`super::provenance::build`]).
    pub by: String,
    /// Compute time.
    pub seconds: f64,
}

impl Made {
    /// Computed now, by this build, in `seconds`.
    pub fn now(seconds: f64) -> Self {
        static BY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let by = BY.get_or_init(|| {
            let b = super::provenance::build();
            let short = |s: &str| s.chars().take(12).collect::<String>();
            format!(
                "{} {} {}",
                b.version,
                short(&b.commit),
                short(&b.binary_sha256)
            )
        });
        Made {
            at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            by: by.clone(),
            seconds,
        }
    }

    /// Its time as RFC 3339 UTC, to the second.
    pub(crate) fn at_text(&self) -> String {
        humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(self.at),
        )
        .to_string()
    }
}

/// The digest of a frame as an entry holds it: sha256 of its bytes and its height (a frame
/// without columns is no bytes, and its height is all it says). The frame only, not the
/// artifacts: readers see the frame, and a log that differs (a program printing its run
/// time) must not defeat the early cutoff.
fn frame_digest(frame_bytes: &[u8], height: usize) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"dplab-frame-1");
    h.update((height as u64).to_le_bytes());
    h.update(frame_bytes);
    h.finalize().into()
}

/// A store directory. Clones share the pack being appended to.
#[derive(Clone)]
pub struct InstanceStore {
    root: PathBuf,
    /// The pack small entries are appended to, once one is.
    open: Arc<Mutex<Option<OpenPack>>>,
    /// Every entry's location: the packs' indexes and the names of the entry files, read at
    /// the first lookup (so a miss costs no system call: a cold run of 10⁶ instances spent 3 s
    /// failing to open files) and extended by what this process writes (so the next pipeline
    /// of a run finds it). An entry another process stores later is not seen: its instance
    /// runs again, with the same result.
    packed: Arc<RwLock<Option<PackIndex>>>,
    /// Instances a shard is computing for others too (see [`super::claim`]).
    claims: Arc<super::claim::Claims>,
}

/// Entries smaller than this go into packs.
pub(crate) const SMALL: usize = 64 * 1024;
/// A pack is closed (and indexed) when it holds this many bytes…
pub(crate) const PACK_BYTES: usize = 16 << 20;
/// …or this many entries.
pub(crate) const PACK_ENTRIES: usize = 16384;
/// What precedes each entry in a pack: this magic, the key (32 bytes), the entry's length
/// (8 bytes, little-endian).
const ENTRY_MAGIC: &[u8; 4] = b"DPE1";
const ENTRY_HEADER: usize = 4 + 32 + 8;

/// Where a stored key is: in a pack (pack, offset, length), or `None`: in its own file.
type Location = Option<(Arc<Pack>, u64, u64)>;

/// Every stored key's [`Location`], compactly: a run of 10⁶ instances stores each under two
/// keys (its own and its key by content), a table of 2²² slots, and each byte of a slot is
/// 4 MB (an `Arc` and two `u64`s per key took 120 MB for half as many keys; whole 32-byte keys
/// 189 MB, their first 16 bytes 122 MB). Entries in packs are small ([`SMALL`]) and packs a
/// few times [`PACK_BYTES`], so an offset and a length fit in 32 bits; a pack entry that does
/// not is left out (a miss: its instance runs again).
#[derive(Default)]
struct PackIndex {
    packs: Vec<Arc<Pack>>,
    slots: HashMap<Short, Slot>,
}

/// A key by its first 128 bits. Keys are sha256 digests, so two stored keys share them with
/// probability about n²/2¹²⁹ (10⁻²⁶ for 10⁶ keys); and should two (or a crafted pair) share
/// them, the later one's place is the only one kept and a read checks the whole key in the
/// entry's header ([`InstanceStore::read`]): the other is a miss, and its instance runs
/// again. An entry in a file of its own is found by its whole key's name.
type Short = u128;

fn short(key: &[u8; 32]) -> Short {
    let mut b = [0u8; 16];
    b.copy_from_slice(&key[..16]);
    u128::from_le_bytes(b)
}

/// A key's place: in `packs[pack]` at (`off`, `len`), or in its own file ([`OWN_FILE`]).
#[derive(Clone, Copy)]
struct Slot {
    pack: u32,
    off: u32,
    len: u32,
}

const OWN_FILE: Slot = Slot {
    pack: u32::MAX,
    off: 0,
    len: 0,
};

impl PackIndex {
    fn get(&self, key: &[u8; 32]) -> Option<Location> {
        let s = self.slots.get(&short(key))?;
        Some(
            self.packs
                .get(s.pack as usize)
                .map(|p| (p.clone(), u64::from(s.off), u64::from(s.len))),
        )
    }

    fn own_file(&mut self, key: [u8; 32]) {
        self.slots.insert(short(&key), OWN_FILE);
    }

    /// Adds one entry of `pack` (the pack being appended to), and the pack if it is new.
    fn pack_entry(&mut self, pack: &Arc<Pack>, entry: PackRecord) {
        if !self.packs.iter().rev().any(|p| Arc::ptr_eq(p, pack)) {
            self.pack(pack.clone(), [entry]);
            return;
        }
        let at = self.packs.iter().rposition(|p| Arc::ptr_eq(p, pack));
        let (k, off, len) = entry;
        if let (Some(at), Ok(off), Ok(len)) = (at, u32::try_from(off), u32::try_from(len)) {
            self.slots.insert(
                short(&k),
                Slot {
                    pack: at as u32,
                    off,
                    len,
                },
            );
        }
    }

    fn forget(&mut self, key: &[u8; 32]) {
        self.slots.remove(&short(key));
    }

    /// Adds a pack and its entries (those whose place fits a [`Slot`]).
    fn pack(&mut self, pack: Arc<Pack>, entries: impl IntoIterator<Item = PackRecord>) {
        let Some(at) = u32::try_from(self.packs.len())
            .ok()
            .filter(|&p| p != OWN_FILE.pack)
        else {
            return;
        };
        self.packs.push(pack);
        for (k, off, len) in entries {
            if let (Ok(off), Ok(len)) = (u32::try_from(off), u32::try_from(len)) {
                self.slots.insert(short(&k), Slot { pack: at, off, len });
            }
        }
    }
}

/// A pack, opened at its first read and kept open (a warm run of 10⁶ instances opened its
/// packs 10⁶ times).
struct Pack {
    path: PathBuf,
    file: std::sync::OnceLock<Option<fs::File>>,
}

impl Pack {
    fn new(path: PathBuf) -> Arc<Self> {
        Arc::new(Pack {
            path,
            file: std::sync::OnceLock::new(),
        })
    }
}

/// The pack this process appends small entries to.
struct OpenPack {
    file: fs::File,
    pack: Arc<Pack>,
    /// Its length so far.
    len: u64,
    index: Vec<PackRecord>,
}

#[derive(Serialize, Deserialize)]
struct Meta {
    /// The format of an entry; entries of another format are misses.
    format: u32,
    kind: String,
    /// Bytes of the frame (0: a frame with no columns, of `height` rows).
    frame: usize,
    /// How the frame is written: [`crate::frames::encode`], or Parquet for column types
    /// that does not cover.
    parquet: bool,
    height: usize,
    /// Each artifact's extension and size, in order after the frame.
    artifacts: Vec<(String, usize)>,
    /// sha256 of everything after the JSON line.
    sha256: String,
    /// Absent in entries of dplab before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    made: Option<Made>,
}

const FORMAT: u32 = 3;

impl InstanceStore {
    /// The store at `root` (created when first written to).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        InstanceStore {
            claims: Arc::new(super::claim::Claims::new(&root)),
            root,
            open: Arc::default(),
            packed: Arc::default(),
        }
    }

    /// The claims of this store: who is computing what other shards wait for.
    pub fn claims(&self) -> &super::claim::Claims {
        &self.claims
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn entry(&self, key: &Key) -> PathBuf {
        let hex = key.to_string();
        self.root.join("objects").join(&hex[..2]).join(hex)
    }

    /// Whether an entry for `key` exists (without reading it).
    pub fn contains(&self, key: &Key) -> bool {
        self.locate(&key.0).is_some()
    }

    /// Where `key` is stored, if anywhere, reading the store's indexes at the first call.
    fn locate(&self, key: &[u8; 32]) -> Option<Location> {
        {
            let r = self.packed.read().unwrap_or_else(|e| e.into_inner());
            if let Some(map) = r.as_ref() {
                return map.get(key);
            }
        }
        let mut w = self.packed.write().unwrap_or_else(|e| e.into_inner());
        let map = w.get_or_insert_with(|| {
            let mut map = PackIndex::default();
            for e in self.entries().into_iter().filter(|e| !e.packed) {
                if let Some(k) = Key::parse(&e.key) {
                    map.own_file(k.0);
                }
            }
            for (pack, entries) in read_packs(&self.root) {
                map.pack(Pack::new(pack), entries);
            }
            map
        });
        map.get(key)
    }

    /// The bytes of `key`'s entry, from a pack or its own file.
    // A pack or entry file of the instance store: dplab wrote it under the store root.
    #[expect(clippy::disallowed_methods)]
    fn read(&self, key: &Key) -> Option<Vec<u8>> {
        if let Some((pack, off, len)) = self.locate(&key.0)? {
            use std::os::unix::fs::FileExt;
            let f = pack
                .file
                .get_or_init(|| fs::File::open(&pack.path).ok())
                .as_ref()?;
            // The entry with what precedes it, its header, whose key must be this one: the
            // index knows keys by their first 128 bits ([`Short`]), the header by all 256. A
            // pack written before entries had headers (2026-11-28) has none to check: its
            // entries are read where its index says, as they were.
            let len = usize::try_from(len).ok().filter(|&l| l <= 1 << 30)?;
            let before = off.min(ENTRY_HEADER as u64) as usize;
            let mut buf = vec![0; before + len];
            if f.read_exact_at(&mut buf, off - before as u64).is_ok() {
                let headed = before == ENTRY_HEADER && buf[..4] == *ENTRY_MAGIC;
                if !headed || (buf[4..36] == key.0 && buf[36..44] == (len as u64).to_le_bytes()) {
                    buf.drain(..before);
                    return Some(buf);
                }
            }
        }
        fs::read(self.entry(key)).ok()
    }

    /// The stored result of `key`, or `None` when there is none or it does not check out.
    pub fn get(&self, key: &Key) -> Option<InstanceResult> {
        decode(&self.read(key)?)
    }

    /// [`Self::get`] of an entry file another process may have written since this one read
    /// the store's index (a shard looks again before computing what other shards need too).
    /// Packs are not looked at again: what goes into them took under [`SLOW`] to compute.
    // An entry file of the instance store: dplab wrote it under the store root.
    #[expect(clippy::disallowed_methods)]
    pub(crate) fn get_fresh(&self, key: &Key) -> Option<InstanceResult> {
        let found = decode(&fs::read(self.entry(key)).ok()?)?;
        self.remember(|m| m.own_file(key.0));
        Some(found)
    }
}

/// An entry's result, or `None` when it does not check out.
fn decode(bytes: &[u8]) -> Option<InstanceResult> {
    let nl = bytes.iter().position(|&b| b == b'\n')?;
    let meta: Meta = serde_json::from_slice(&bytes[..nl]).ok()?;
    let body = &bytes[nl + 1..];
    if meta.format != FORMAT || crate::text::hex(&Sha256::digest(body)) != meta.sha256 {
        return None;
    }
    let frame = if meta.frame > 0 && meta.parquet {
        ParquetReader::new(std::io::Cursor::new(body.get(..meta.frame)?))
            .read_parallel(ParallelStrategy::None)
            .finish()
            .ok()?
    } else if meta.frame > 0 {
        crate::frames::decode(body.get(..meta.frame)?).ok()?
    } else {
        DataFrame::empty_with_height(meta.height)
    };
    let mut at = meta.frame;
    let mut artifacts = Vec::new();
    for (ext, len) in &meta.artifacts {
        artifacts.push(Artifact {
            ext: Some(ext.clone())
                .filter(|e| crate::text::plain_file_name(e))?
                .into(),
            bytes: body.get(at..at + len)?.to_vec(),
        });
        at += len;
    }
    Some(InstanceResult {
        frame,
        artifacts,
        // Taking it from the store took no compute time (what computing it took is in
        // `made`).
        seconds: 0.0,
        digest: Some(frame_digest(body.get(..meta.frame)?, meta.height)),
        made: meta.made,
    })
}

impl InstanceStore {
    /// Stores `result` under `key`: a small entry appended to this process's pack, a larger
    /// one in a file of its own (tmp + rename). Either is in the store when this returns.
    /// Returns the frame's digest ([`InstanceResult::digest`]).
    pub fn put(&self, key: &Key, kind: &str, result: &InstanceResult) -> Result<[u8; 32]> {
        self.put_entry(&[*key], kind, result, true)
    }

    /// [`Self::put`] under each of `keys` (an instance's key and its key by content), the
    /// entry encoded once.
    pub(crate) fn put_as(
        &self,
        keys: &[Key],
        kind: &str,
        result: &InstanceResult,
    ) -> Result<[u8; 32]> {
        self.put_entry(keys, kind, result, true)
    }

    /// [`Self::put`] in a file of its own, whatever its size: what other processes wait for
    /// (a claimed instance) must be where [`Self::get_fresh`] looks when the claim ends.
    pub(crate) fn put_now(
        &self,
        keys: &[Key],
        kind: &str,
        result: &InstanceResult,
    ) -> Result<[u8; 32]> {
        self.put_entry(keys, kind, result, false)
    }

    fn put_entry(
        &self,
        keys: &[Key],
        kind: &str,
        result: &InstanceResult,
        pack: bool,
    ) -> Result<[u8; 32]> {
        let mut body = Vec::new();
        let mut parquet = false;
        if result.frame.width() > 0 {
            if let Some(b) = crate::frames::encode(&result.frame) {
                body = b;
            } else {
                parquet = true;
                let mut frame = result.frame.clone();
                // One chunk per column: a gathered frame can hold one chunk per instance.
                frame.rechunk_mut();
                // Not parallel: an entry is one instance's frame, and the engine runs as many
                // instances at once as it has threads.
                ParquetWriter::new(&mut body)
                    .set_parallel(false)
                    .finish(&mut frame)?;
            }
        }
        let frame_len = body.len();
        let digest = frame_digest(&body, result.frame.height());
        for a in &result.artifacts {
            body.extend_from_slice(&a.bytes);
        }
        let meta = Meta {
            format: FORMAT,
            kind: kind.to_string(),
            frame: frame_len,
            parquet,
            height: result.frame.height(),
            artifacts: result
                .artifacts
                .iter()
                .map(|a| (a.ext.to_string(), a.bytes.len()))
                .collect(),
            sha256: crate::text::hex(&Sha256::digest(&body)),
            // A result taken from the store and filed under another key keeps when it was
            // computed.
            made: Some(
                result
                    .made
                    .clone()
                    .unwrap_or_else(|| Made::now(result.seconds)),
            ),
        };
        let mut line = serde_json::to_vec(&meta)?;
        line.push(b'\n');
        // A small entry is one piece (one `write` into a pack); a large one is written as its
        // line and its body, never joined: the 10⁶-row frame of a summary was held twice.
        let small = (pack && line.len() + body.len() < SMALL).then(|| [&line[..], &body].concat());
        for key in keys {
            if let Some(entry) = &small {
                self.append(key, entry)?;
                continue;
            }
            let final_path = self.entry(key);
            self.place_parts(&[&line, &body], &final_path)
                .with_context(|| format!("storing {}", final_path.display()))?;
            self.remember(|m| m.own_file(key.0));
        }
        Ok(digest)
    }

    /// Adds what this process stored to the index, once the index has been read (before,
    /// reading it finds them on disk).
    fn remember(&self, add: impl FnOnce(&mut PackIndex)) {
        if let Some(map) = self
            .packed
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            add(map);
        }
    }

    /// Appends a small entry to this process's open pack (opening one if none is), in one
    /// `write` of header and entry: in the store once it returns (see the module doc).
    fn append(&self, key: &Key, entry: &[u8]) -> Result<()> {
        let mut record = Vec::with_capacity(ENTRY_HEADER + entry.len());
        record.extend_from_slice(ENTRY_MAGIC);
        record.extend_from_slice(&key.0);
        record.extend_from_slice(&(entry.len() as u64).to_le_bytes());
        record.extend_from_slice(entry);
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.is_none() {
            *open = Some(self.open_pack()?);
        }
        let p = open.as_mut().expect("opened above");
        {
            use std::io::Write;
            if let Err(e) = p.file.write_all(&record) {
                // A part of it may be there: the pack ends here (its scan stops at it).
                let path = p.pack.path.clone();
                *open = None;
                return Err(e).with_context(|| format!("storing in {}", path.display()));
            }
        }
        let at = (key.0, p.len + ENTRY_HEADER as u64, entry.len() as u64);
        p.len += record.len() as u64;
        p.index.push(at);
        let pack = p.pack.clone();
        self.remember(|m| m.pack_entry(&pack, at));
        if p.len as usize >= PACK_BYTES || p.index.len() >= PACK_ENTRIES {
            let full = open.take().expect("open");
            drop(open);
            return self.seal(full);
        }
        Ok(())
    }

    // A pack of the instance store: dplab creates it under the store root.
    #[expect(clippy::disallowed_methods)]
    fn open_pack(&self) -> Result<OpenPack> {
        let dir = self.root.join("packs");
        let path = dir.join(format!("{}-{}.pack", std::process::id(), unique_suffix()));
        let create = || {
            fs::OpenOptions::new()
                .append(true)
                .create_new(true)
                .open(&path)
        };
        let file = create()
            .or_else(|e| {
                if e.kind() != std::io::ErrorKind::NotFound {
                    return Err(e);
                }
                fs::create_dir_all(&dir)?;
                create()
            })
            .with_context(|| format!("creating {}", path.display()))?;
        Ok(OpenPack {
            file,
            pack: Pack::new(path),
            len: 0,
            index: Vec::new(),
        })
    }

    /// Writes the index of a pack no more is appended to.
    fn seal(&self, full: OpenPack) -> Result<()> {
        let idx_path = full.pack.path.with_extension("idx");
        self.place(&index_bytes(&full.index), &idx_path)
            .with_context(|| format!("storing {}", idx_path.display()))
    }

    /// Ends this process's open pack, writing its index. A run calls this at its end
    /// (whether it succeeded or not); what was appended is in the store before, too.
    pub fn flush(&self) -> Result<()> {
        let full = self.open.lock().unwrap_or_else(|e| e.into_inner()).take();
        match full {
            Some(p) => self.seal(p),
            None => Ok(()),
        }
    }

    /// Takes the entries of `keys` out of the store (a `--verify` found their stage not
    /// deterministic): their files, and their parts of packs (each pack rewritten once,
    /// without them). How many entries were removed.
    pub(crate) fn forget(&self, keys: &[Key]) -> Result<usize> {
        self.flush()?;
        let set: std::collections::HashSet<[u8; 32]> = keys.iter().map(|k| k.0).collect();
        let mut n = 0;
        for key in keys {
            match fs::remove_file(self.entry(key)) {
                Ok(()) => n += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).context("removing a store entry"),
            }
        }
        for (pack, entries) in read_packs(&self.root) {
            let gone = entries.iter().filter(|(k, _, _)| set.contains(k)).count();
            if gone > 0 {
                self.rewrite_pack(&pack, &entries, |k| !set.contains(k))?;
                n += gone;
            }
        }
        self.remember(|m| set.iter().for_each(|k| m.forget(k)));
        Ok(n)
    }

    /// Replaces `pack` (holding `entries`) by a pack of the entries `keep` keeps, or by
    /// nothing. Whether the old pack is gone.
    // A pack of the instance store: dplab wrote it under the store root.
    #[expect(clippy::disallowed_methods)]
    fn rewrite_pack(
        &self,
        pack: &Path,
        entries: &[PackRecord],
        keep: impl Fn(&[u8; 32]) -> bool,
    ) -> Result<bool> {
        let kept: Vec<&PackRecord> = entries.iter().filter(|(k, _, _)| keep(k)).collect();
        if !kept.is_empty() {
            let all = fs::read(pack)?;
            let mut bytes_out = Vec::new();
            let mut index = Vec::new();
            for (k, off, len) in kept {
                let (off, len) = (*off as usize, *len as usize);
                let Some(bytes) = all.get(off..off + len) else {
                    continue;
                };
                bytes_out.extend_from_slice(ENTRY_MAGIC);
                bytes_out.extend_from_slice(k);
                bytes_out.extend_from_slice(&(len as u64).to_le_bytes());
                index.push((*k, bytes_out.len() as u64, len as u64));
                bytes_out.extend_from_slice(bytes);
            }
            self.write_pack(&bytes_out, &index)?;
        }
        // The index first: a pack without one is read by its headers, and an old-format one
        // (entries without headers) is then invisible.
        match fs::remove_file(pack.with_extension("idx")) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        fs::remove_file(pack)?;
        Ok(true)
    }

    fn write_pack(&self, bytes: &[u8], index: &[PackRecord]) -> Result<()> {
        let name = format!("{}-{}", std::process::id(), unique_suffix());
        let dir = self.root.join("packs");
        let pack = dir.join(format!("{name}.pack"));
        self.place(bytes, &pack)
            .with_context(|| format!("storing {}", pack.display()))?;
        self.remember(|m| m.pack(Pack::new(pack), index.iter().copied()));
        let idx_path = dir.join(format!("{name}.idx"));
        self.place(&index_bytes(index), &idx_path)
            .with_context(|| format!("storing {}", idx_path.display()))
    }

    /// Writes `bytes` to `path` by way of a unique file in `tmp/`, creating directories only
    /// when missing (a small file costs an open, a write and a rename).
    fn place(&self, bytes: &[u8], path: &Path) -> Result<()> {
        self.place_parts(&[bytes], path)
    }

    /// [`Self::place`] of the parts one after another.
    fn place_parts(&self, parts: &[&[u8]], path: &Path) -> Result<()> {
        let tmp_root = self.root.join("tmp");
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().to_string());
        let tmp = tmp_root.join(format!("{name}.{}.{}", std::process::id(), unique_suffix()));
        let write = || {
            use std::io::Write;
            let mut f = fs::File::create(&tmp)?;
            parts.iter().try_for_each(|p| f.write_all(p))
        };
        let written = write().or_else(|e| {
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(e);
            }
            fs::create_dir_all(&tmp_root)?;
            write()
        });
        let placed = written.and_then(|()| {
            fs::rename(&tmp, path).or_else(|e| {
                if e.kind() != std::io::ErrorKind::NotFound {
                    return Err(e);
                }
                fs::create_dir_all(path.parent().expect("has a parent"))?;
                fs::rename(&tmp, path)
            })
        });
        if placed.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        Ok(placed?)
    }
}

/// A suffix no other writer in this process uses (with the PID: none on this host).
fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{nanos:x}-{}", N.fetch_add(1, Ordering::Relaxed))
}

const IDX_MAGIC: &[u8; 4] = b"DPI1";

/// A pack's index file: the magic, then (key, offset, length) per entry.
fn index_bytes(index: &[PackRecord]) -> Vec<u8> {
    let mut idx = Vec::with_capacity(4 + index.len() * 48);
    idx.extend_from_slice(IDX_MAGIC);
    for (k, off, len) in index {
        idx.extend_from_slice(k);
        idx.extend_from_slice(&off.to_le_bytes());
        idx.extend_from_slice(&len.to_le_bytes());
    }
    idx
}

/// The entries of a pack read by their headers (a pack without an index: being written, or
/// its writer was killed), up to the first header that does not check out or whose entry
/// does not fit in the file.
fn scan_pack(bytes: &[u8]) -> Vec<PackRecord> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while let Some(h) = bytes.get(at..at + ENTRY_HEADER) {
        if &h[..4] != ENTRY_MAGIC {
            break;
        }
        let key: [u8; 32] = h[4..36].try_into().expect("32 bytes");
        let len = u64::from_le_bytes(h[36..44].try_into().expect("8 bytes"));
        let start = at + ENTRY_HEADER;
        let Some(end) = usize::try_from(len)
            .ok()
            .and_then(|l| start.checked_add(l))
            .filter(|&e| e <= bytes.len())
        else {
            break;
        };
        out.push((key, start as u64, len));
        at = end;
    }
    out
}

/// One entry of a pack's index: key, offset in the pack, length.
type PackRecord = ([u8; 32], u64, u64);

/// Every pack with an index that reads whole: (pack, its entries).
// The pack indexes of the instance store: dplab wrote them under the store root.
#[expect(clippy::disallowed_methods)]
fn read_packs(root: &Path) -> Vec<(PathBuf, Vec<PackRecord>)> {
    let mut out = Vec::new();
    let Ok(dir) = fs::read_dir(root.join("packs")) else {
        return out;
    };
    let mut packs: Vec<PathBuf> = dir
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "pack"))
        .collect();
    packs.sort();
    for pack in packs {
        let idx = pack.with_extension("idx");
        if !idx.exists() {
            if let Ok(bytes) = fs::read(&pack) {
                let entries = scan_pack(&bytes);
                if !entries.is_empty() {
                    out.push((pack, entries));
                }
            }
            continue;
        }
        let (Ok(bytes), Ok(meta)) = (fs::read(&idx), fs::metadata(&pack)) else {
            continue;
        };
        let Some(body) = bytes.strip_prefix(IDX_MAGIC.as_slice()) else {
            continue;
        };
        if body.len() % 48 != 0 {
            continue;
        }
        let entries: Vec<PackRecord> = body
            .chunks_exact(48)
            .map(|c| {
                (
                    c[..32].try_into().expect("32 bytes"),
                    u64::from_le_bytes(c[32..40].try_into().expect("8 bytes")),
                    u64::from_le_bytes(c[40..48].try_into().expect("8 bytes")),
                )
            })
            .collect();
        // An index pointing past its pack is not trusted at all.
        if entries
            .iter()
            .all(|(_, off, len)| off.checked_add(*len).is_some_and(|e| e <= meta.len()))
        {
            out.push((pack, entries));
        }
    }
    out
}

/// One entry on disk: its own file, or a part of a pack.
pub struct Entry {
    pub key: String,
    pub bytes: u64,
    pub path: PathBuf,
    /// Whether `path` is a pack holding this entry among others.
    pub packed: bool,
}

impl InstanceStore {
    /// Every entry: files named by a 64-hex-digit key under `objects/<2 hex>/`, and the
    /// entries of every indexed pack. A key stored twice (by two processes at once) is listed
    /// twice.
    pub fn entries(&self) -> Vec<Entry> {
        let mut out = Vec::new();
        for (pack, entries) in read_packs(&self.root) {
            for (k, _, len) in entries {
                out.push(Entry {
                    key: crate::text::hex(&k),
                    bytes: len,
                    path: pack.clone(),
                    packed: true,
                });
            }
        }
        let Ok(shards) = fs::read_dir(self.root.join("objects")) else {
            out.sort_by(|a, b| a.key.cmp(&b.key));
            return out;
        };
        for shard in shards.flatten() {
            let Ok(files) = fs::read_dir(shard.path()) else {
                continue;
            };
            for f in files.flatten() {
                let name = f.file_name().to_string_lossy().to_string();
                let is_key = name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit());
                let meta = f.metadata();
                if is_key && meta.as_ref().is_ok_and(|m| m.is_file()) {
                    out.push(Entry {
                        key: name,
                        bytes: meta.map_or(0, |m| m.len()),
                        path: f.path(),
                        packed: false,
                    });
                }
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }

    /// Removes every entry whose key is not in `keep`: its file, or its part of a pack (a
    /// pack with nothing left is removed, one with some entries left is rewritten with only
    /// those); packs holding no whole entry, files killed writers left in `tmp/` and claims
    /// killed shards left in `claims/`, more than an hour old, go too. Returns (entries removed, bytes freed).
    // Packs of the instance store being rewritten: dplab wrote them under the store root.
    #[expect(clippy::disallowed_methods)]
    pub fn gc(&self, keep: &std::collections::HashSet<String>) -> (usize, u64) {
        let (mut n, mut bytes) = (0, 0);
        for e in self.entries().into_iter().filter(|e| !e.packed) {
            if !keep.contains(&e.key) && fs::remove_file(&e.path).is_ok() {
                n += 1;
                bytes += e.bytes;
            }
        }
        for (pack, entries) in read_packs(&self.root) {
            let gone: Vec<&PackRecord> = entries
                .iter()
                .filter(|(k, _, _)| !keep.contains(&crate::text::hex(k)))
                .collect();
            if gone.is_empty() {
                continue;
            }
            if self
                .rewrite_pack(&pack, &entries, |k| keep.contains(&crate::text::hex(k)))
                .unwrap_or(false)
            {
                n += gone.len();
                bytes += gone.iter().map(|(_, _, l)| l).sum::<u64>();
            }
        }
        let hour_old = |p: &Path| {
            fs::metadata(p)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age.as_secs() > 3600)
        };
        if let Ok(packs) = fs::read_dir(self.root.join("packs")) {
            for f in packs.flatten() {
                let p = f.path();
                // A pack without an index whose headers hold nothing (an old format's, or
                // one its writer was killed before the first entry was whole).
                if p.extension().is_some_and(|x| x == "pack")
                    && !p.with_extension("idx").exists()
                    && hour_old(&p)
                    && fs::read(&p).is_ok_and(|b| scan_pack(&b).is_empty())
                {
                    let _ = fs::remove_file(&p);
                }
            }
        }
        // Claims too: a holder touches its claims every few seconds, so an hour-old one is
        // long dead.
        for dir in ["tmp", "claims"] {
            let Ok(files) = fs::read_dir(self.root.join(dir)) else {
                continue;
            };
            for f in files.flatten() {
                if hour_old(&f.path()) && f.path().is_file() {
                    let _ = fs::remove_file(f.path());
                }
            }
        }
        (n, bytes)
    }
}

/// The instance keys a results directory's manifest references (empty if it has none).
pub fn manifest_keys(results_dir: &Path) -> std::collections::HashSet<String> {
    let mut keys = std::collections::HashSet::new();
    let Ok(bytes) = crate::regular::read_regular_file(&results_dir.join("manifest.json"), 1 << 32)
    else {
        return keys;
    };
    let Ok(m) = serde_json::from_slice::<super::manifest::Manifest>(&bytes) else {
        return keys;
    };
    for stage in m.stages {
        keys.extend(
            stage
                .seeds
                .into_iter()
                .flat_map(|s| std::iter::once(s.key).chain(s.content_key)),
        );
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(x: f64) -> InstanceResult {
        InstanceResult {
            frame: polars::df!("x" => [x]).expect("a frame"),
            artifacts: Vec::new(),
            seconds: 0.0,
            digest: None,
            made: None,
        }
    }

    fn x(found: Option<InstanceResult>) -> Option<f64> {
        found.map(|r| {
            r.frame
                .column("x")
                .expect("x")
                .f64()
                .expect("f64")
                .get(0)
                .expect("a value")
        })
    }

    /// Two keys that share the 128 bits the index knows them by: the later one is found, and
    /// the earlier one is a miss (it runs again), never the other's result — in the process
    /// that stored them and in one that reads the store afresh.
    #[test]
    fn keys_sharing_their_first_128_bits_never_serve_each_other() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let a = Key([7; 32]);
        let mut b = a;
        b.0[31] = 8;
        let store = InstanceStore::new(dir.path());
        assert!(!store.contains(&a), "reads the (empty) index");
        store.put(&a, "test.kind", &result(1.0)).expect("stored");
        assert_eq!(x(store.get(&a)), Some(1.0));
        store.put(&b, "test.kind", &result(2.0)).expect("stored");
        for s in [store.clone(), InstanceStore::new(dir.path())] {
            assert_eq!(x(s.get(&b)), Some(2.0));
            assert_eq!(x(s.get(&a)), None);
        }
    }

    /// A pack of the format before entries had headers (entries back to back, an index of
    /// their places) is still read: its entries are found, the first at offset 0 too.
    #[test]
    fn a_pack_without_headers_is_still_read() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let keys = [Key([1; 32]), Key([2; 32])];
        let store = InstanceStore::new(dir.path());
        let mut bytes = Vec::new();
        let mut index = Vec::new();
        for (k, v) in keys.iter().zip([1.0, 2.0]) {
            store.put(k, "test.kind", &result(v)).expect("stored");
            let entry = store.read(k).expect("just stored");
            index.push((k.0, bytes.len() as u64, entry.len() as u64));
            bytes.extend_from_slice(&entry);
        }
        drop(store);
        let packs = dir.path().join("packs");
        std::fs::remove_dir_all(&packs).expect("removed");
        std::fs::create_dir_all(&packs).expect("made");
        std::fs::write(packs.join("old.pack"), &bytes).expect("written");
        std::fs::write(packs.join("old.idx"), index_bytes(&index)).expect("written");
        let store = InstanceStore::new(dir.path());
        assert_eq!(x(store.get(&keys[0])), Some(1.0));
        assert_eq!(x(store.get(&keys[1])), Some(2.0));
    }
}
