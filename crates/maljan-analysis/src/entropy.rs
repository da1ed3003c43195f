//! `entropy`: Shannon entropy of the whole file, of fixed windows, and of each section of a PE,
//! ELF or Mach-O file (packed or encrypted code shows as entropy near 8).

use std::sync::Arc;

use maljan_server::{Registry, ToolError, ToolMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    AnalysisConfig,
    budget::Budget,
    common::{Page, check_cancel, contain, on_sample},
};

/// Shannon entropy in bits per byte (0..=8), rounded to 4 decimals.
pub fn shannon(bytes: &[u8]) -> f64 {
    let mut counts = [0u64; 256];
    count_bytes(bytes, &mut counts);
    entropy_of(&counts)
}

/// Adds how often each byte value occurs in `bytes` to `counts` (so a long input can be counted
/// chunk by chunk).
pub fn count_bytes(bytes: &[u8], counts: &mut [u64; 256]) {
    // Four histograms break the store-to-load dependency on runs of one byte value.
    let mut lanes = [[0u64; 256]; 4];
    let mut chunks = bytes.chunks_exact(4);
    for c in &mut chunks {
        lanes[0][c[0] as usize] += 1;
        lanes[1][c[1] as usize] += 1;
        lanes[2][c[2] as usize] += 1;
        lanes[3][c[3] as usize] += 1;
    }
    for &b in chunks.remainder() {
        lanes[0][b as usize] += 1;
    }
    for (i, count) in counts.iter_mut().enumerate() {
        *count += lanes[0][i] + lanes[1][i] + lanes[2][i] + lanes[3][i];
    }
}

/// The Shannon entropy of a byte histogram, rounded to 4 decimals.
pub fn entropy_of(counts: &[u64; 256]) -> f64 {
    let n: u64 = counts.iter().sum();
    if n == 0 {
        return 0.0;
    }
    let n = n as f64;
    let h: f64 = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum();
    (h * 10_000.0).round() / 10_000.0
}

/// A named region of the file and its entropy.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct Region {
    pub name: String,
    pub offset: u64,
    pub size: u64,
    pub entropy: f64,
}

/// The file regions of a PE / ELF / Mach-O file's sections (empty for other files), each
/// charged to `budget` as an item.
pub fn section_regions(b: &[u8], budget: &Budget) -> Result<Vec<(String, u64, u64)>, ToolError> {
    contain("object", || {
        let mut regions = Vec::new();
        if crate::identify::pe_header_offset(b).is_some() {
            let Ok(pe) = crate::pe::parse(b) else {
                return Ok(regions);
            };
            for s in &pe.sections {
                budget.items(1, "sections")?;
                let name = String::from_utf8_lossy(&s.name)
                    .trim_end_matches('\0')
                    .to_string();
                regions.push((
                    name,
                    u64::from(s.pointer_to_raw_data),
                    u64::from(s.size_of_raw_data),
                ));
            }
        } else if b.starts_with(b"\x7fELF") {
            let Ok(elf) = goblin::elf::Elf::parse(b) else {
                return Ok(regions);
            };
            for s in &elf.section_headers {
                budget.items(1, "sections")?;
                if s.sh_type != goblin::elf::section_header::SHT_NOBITS && s.sh_size > 0 {
                    let name = elf.shdr_strtab.get_at(s.sh_name).unwrap_or("");
                    budget.scan(name.len(), "section names")?;
                    regions.push((name.to_string(), s.sh_offset, s.sh_size));
                }
            }
        } else if let Ok(m) = goblin::mach::MachO::parse(b, 0) {
            for seg in &m.segments {
                budget.items(1, "Mach-O segments")?;
                for (s, _) in crate::macho_parts::sections(seg, m.is_64, budget)? {
                    let name =
                        format!("{},{}", s.segname().unwrap_or("?"), s.name().unwrap_or("?"));
                    if s.offset != 0 {
                        regions.push((name, u64::from(s.offset), s.size));
                    }
                }
            }
        }
        Ok(regions)
    })
}

/// Entropy of each section region, clamped to the file, within `budget`.
pub fn sections(b: &[u8], budget: &Budget) -> Result<Vec<Region>, ToolError> {
    section_regions(b, budget)?
        .into_iter()
        .map(|(name, offset, size)| {
            let start = (offset as usize).min(b.len());
            let end = start.saturating_add(size as usize).min(b.len());
            Ok(Region {
                name,
                offset,
                size,
                entropy: budget.entropy(&b[start..end], "sections")?,
            })
        })
        .collect()
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EntropyArgs {
    /// The sample file (inside the server's roots).
    #[serde(default)]
    pub path: String,
    /// A file carved from the sample (under the job's carved/<sha256>/ directory); read instead of `path`.
    #[serde(default)]
    pub carved_path: String,
    /// Window size in bytes for the per-window entropy (0: no windows).
    #[serde(default = "default_window")]
    #[schemars(default = "default_window")]
    pub window: usize,
    /// Most windows returned in one answer.
    #[serde(default = "default_limit")]
    #[schemars(default = "default_limit")]
    pub limit: usize,
    /// Index of the first window returned (paging).
    #[serde(default)]
    pub offset: usize,
}

fn default_window() -> usize {
    65_536
}
fn default_limit() -> usize {
    512
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct EntropyOutput {
    pub read_path: String,
    pub size: u64,
    /// Entropy of the whole file, bits per byte (0..8).
    pub entropy: f64,
    /// Sections of a PE / ELF / Mach-O file.
    pub sections: Vec<Region>,
    pub window: usize,
    /// Windows whose entropy is 7.2 or more (likely compressed or encrypted), counted over all windows.
    pub high_entropy_windows: usize,
    #[serde(flatten)]
    pub page: Page,
    pub windows: Vec<Region>,
}

pub(crate) fn register(registry: &mut Registry, config: &Arc<AnalysisConfig>) {
    let config = config.clone();
    registry.add(
        ToolMeta::new(
            "entropy",
            "Shannon entropy (bits per byte) of the whole sample, of each PE/ELF/Mach-O section, and of \
             fixed-size windows (paged).",
        )
        .title("Entropy")
        .timeout_s(120),
        move |ctx, a: EntropyArgs| {
            let config = config.clone();
            async move {
                if a.window != 0 && a.window < 16 {
                    return Err(ToolError::bad_argument("window must be 0 (none) or at least 16 bytes"));
                }
                on_sample(&config.roots, ctx, a.path, a.carved_path, move |s, ctx| {
                    let b = s.bytes();
                    // Every window is measured (for the high-entropy count) but only the page's
                    // windows are kept: 16-byte windows would otherwise cost ~6x the file.
                    let mut windows = Vec::new();
                    let mut high = 0;
                    let mut total = 0;
                    let limit = a.limit.max(1);
                    if a.window > 0 {
                        for (i, chunk) in b.chunks(a.window).enumerate() {
                            if i % 256 == 0 {
                                check_cancel(ctx)?;
                            }
                            total += 1;
                            let e = shannon(chunk);
                            if e >= 7.2 {
                                high += 1;
                            }
                            if i >= a.offset && windows.len() < limit {
                                let offset = (i * a.window) as u64;
                                windows.push(Region { name: format!("@{offset:#x}"), offset, size: chunk.len() as u64, entropy: e });
                            }
                        }
                    }
                    let page = Page::new(total, a.offset, limit, windows.len());
                    let cancel = || ctx.is_cancelled();
                    let budget = Budget::for_file(b.len(), &cancel);
                    Ok(EntropyOutput {
                        read_path: s.read_path(),
                        size: b.len() as u64,
                        entropy: budget.entropy(b, "the whole file")?,
                        sections: sections(b, &budget)?,
                        window: a.window,
                        high_entropy_windows: high,
                        page,
                        windows,
                    })
                })
                .await
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds() {
        assert_eq!(shannon(&[]), 0.0);
        assert_eq!(shannon(&[7; 1000]), 0.0);
        let all: Vec<u8> = (0..=255u8).cycle().take(256 * 64).collect();
        assert_eq!(shannon(&all), 8.0);
        assert_eq!(shannon(b"abab"), 1.0);
    }
}
