//! A PE's Authenticode signature, read and checked as far as a static look can: the certificate
//! table's WIN_CERTIFICATE entries and the PKCS#7 SignedData they hold (Google's `authenticode`
//! crate, over RustCrypto's `cms` and `x509-cert`), the image's Authenticode digest computed and
//! compared with the one signed, the signed attributes' messageDigest compared with the digest of
//! the signed content, the signer's signature over its signed attributes verified with its
//! certificate's key (`ring`), and the chain's structure: each certificate issued by the next one
//! in the signature — the issuer's name is the next one's subject and its signature verifies with
//! that key — up to a self-signed root or a certificate whose issuer the signature does not carry.
//!
//! No trust store is consulted and no time is checked (signatures are countersigned with a time):
//! "valid" says the file is the one that was signed, by the key of the certificate named, through
//! a chain that holds together; who that signer is stays for the analyst to weigh.

use authenticode::{
    AttributeCertificateIterator, PeOffsetError, PeOffsets, PeTrait, SpcIndirectDataContent,
};
use cms::{
    content_info::ContentInfo,
    signed_data::{SignedData, SignerIdentifier, SignerInfo},
};
use der::{Decode, Encode, asn1::OctetString, oid::ObjectIdentifier};
use ring::signature::{self as sig, UnparsedPublicKey, VerificationAlgorithm};
use schemars::JsonSchema;
use serde::Serialize;
use x509_cert::Certificate;

use crate::{
    common::{le_u16, le_u32},
    identify::pe_header_offset,
};

/// The most certificates followed up a chain.
const MAX_CHAIN: usize = 10;

/// What the signature says and what was checked.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct Signature {
    /// Everything below holds: the digest matches the image, the signer's signature verifies and
    /// every link of the chain does.
    pub valid: bool,
    /// The signer certificate's subject (RFC 4514).
    pub signer: Option<String>,
    /// Its issuer.
    pub issuer: Option<String>,
    /// The digest algorithm of the image digest (sha1, sha256, …).
    pub digest_algorithm: String,
    /// The image's Authenticode digest equals the signed one (the file was not changed since).
    pub digest_matches: bool,
    /// The signed attributes' messageDigest equals the digest of the signed content.
    pub message_digest_matches: bool,
    /// The signer's signature over its signed attributes verifies with its certificate's key
    /// (null: an algorithm this check does not know).
    pub signer_signature_verified: Option<bool>,
    /// The chain from the signer up, each with whether its issuer's key verifies it.
    pub chain: Vec<ChainLink>,
    /// What does not hold, in words.
    pub problems: Vec<String>,
}

/// One certificate of the chain.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct ChainLink {
    pub subject: String,
    pub issuer: String,
    pub not_before: String,
    pub not_after: String,
    /// Verified with the issuer's key (the next link, or itself for a self-signed root); null
    /// when the issuer is not in the signature (a root the host's trust store would hold) or
    /// the algorithm is not one this check knows.
    pub verified: Option<bool>,
}

/// A PE's fields the Authenticode digest skips, read from the headers.
struct Pe<'a> {
    data: &'a [u8],
    sections: Vec<(usize, usize)>,
    certificates: Option<(usize, usize)>,
    offsets: PeOffsets,
}

impl<'a> Pe<'a> {
    fn read(b: &'a [u8]) -> Option<Self> {
        let pe = pe_header_offset(b)?;
        let nsec = usize::from(le_u16(b, pe + 6)?);
        let opt_size = usize::from(le_u16(b, pe + 20)?);
        let opt = pe + 24;
        let magic = le_u16(b, opt)?;
        let dirs = opt + if magic == 0x20b { 112 } else { 96 };
        let count = le_u32(b, dirs - 4)? as usize;
        if count < 5 {
            return None;
        }
        let security = dirs + 4 * 8;
        let (va, size) = (
            le_u32(b, security)? as usize,
            le_u32(b, security + 4)? as usize,
        );
        let table = opt + opt_size;
        let mut sections = Vec::new();
        for i in 0..nsec.min(96) {
            let s = table + i * 40;
            let (raw_size, raw_ptr) = (le_u32(b, s + 16)? as usize, le_u32(b, s + 20)? as usize);
            if raw_size > 0 {
                sections.push((raw_ptr, raw_ptr.checked_add(raw_size)?));
            }
        }
        Some(Pe {
            data: b,
            sections,
            certificates: (va != 0 && size != 0).then(|| (va, va.saturating_add(size))),
            offsets: PeOffsets {
                check_sum: opt + 64,
                after_check_sum: opt + 68,
                security_data_dir: security,
                after_security_data_dir: security + 8,
                after_header: le_u32(b, opt + 60)? as usize,
            },
        })
    }
}

impl PeTrait for Pe<'_> {
    fn data(&self) -> &[u8] {
        self.data
    }
    fn num_sections(&self) -> usize {
        self.sections.len()
    }
    fn section_data_range(&self, index: usize) -> Result<std::ops::Range<usize>, PeOffsetError> {
        let (start, end) = self.sections[index - 1];
        Ok(start..end)
    }
    fn certificate_table_range(&self) -> Result<Option<std::ops::Range<usize>>, PeOffsetError> {
        Ok(self.certificates.map(|(s, e)| s..e))
    }
    fn offsets(&self) -> Result<PeOffsets, PeOffsetError> {
        Ok(self.offsets.clone())
    }
}

const SHA1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.14.3.2.26");
const SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.1");
const SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.2");
const SHA512: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.3");
const MESSAGE_DIGEST: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.4");

fn digest_name(oid: &ObjectIdentifier) -> &'static str {
    match *oid {
        SHA1 => "sha1",
        SHA256 => "sha256",
        SHA384 => "sha384",
        SHA512 => "sha512",
        _ => "unknown",
    }
}

/// `data` hashed with the algorithm named `name`.
fn hash(name: &str, data: &[u8]) -> Option<Vec<u8>> {
    use sha2::Digest;
    Some(match name {
        "sha1" => sha1::Sha1::digest(data).to_vec(),
        "sha256" => sha2::Sha256::digest(data).to_vec(),
        "sha384" => sha2::Sha384::digest(data).to_vec(),
        "sha512" => sha2::Sha512::digest(data).to_vec(),
        _ => return None,
    })
}

/// The image's Authenticode digest with the algorithm named `name`.
fn image_digest(pe: &Pe, name: &str) -> Option<Vec<u8>> {
    use sha2::Digest;
    fn run<D: sha2::Digest + sha2::digest::Update>(pe: &Pe, mut d: D) -> Option<Vec<u8>> {
        authenticode::authenticode_digest(pe, &mut d).ok()?;
        Some(d.finalize().to_vec())
    }
    match name {
        "sha1" => run(pe, sha1::Sha1::new()),
        "sha256" => run(pe, sha2::Sha256::new()),
        "sha384" => run(pe, sha2::Sha384::new()),
        "sha512" => run(pe, sha2::Sha512::new()),
        _ => None,
    }
}

/// The ring algorithm for a signature made with `signature_oid` (a `…WithRSAEncryption` or
/// ECDSA OID, or plain rsaEncryption with `digest` named apart) by a key of `key_oid`.
fn algorithm(
    signature_oid: &ObjectIdentifier,
    digest: &str,
) -> Option<&'static dyn VerificationAlgorithm> {
    let digest = match signature_oid.to_string().as_str() {
        "1.2.840.113549.1.1.1" => digest,
        "1.2.840.113549.1.1.5" => "sha1",
        "1.2.840.113549.1.1.11" => "sha256",
        "1.2.840.113549.1.1.12" => "sha384",
        "1.2.840.113549.1.1.13" => "sha512",
        "1.2.840.10045.4.3.2" => return Some(&sig::ECDSA_P256_SHA256_ASN1),
        "1.2.840.10045.4.3.3" => return Some(&sig::ECDSA_P384_SHA384_ASN1),
        _ => return None,
    };
    Some(match digest {
        "sha1" => &sig::RSA_PKCS1_1024_8192_SHA1_FOR_LEGACY_USE_ONLY,
        "sha256" => &sig::RSA_PKCS1_1024_8192_SHA256_FOR_LEGACY_USE_ONLY,
        "sha384" => &sig::RSA_PKCS1_2048_8192_SHA384,
        "sha512" => &sig::RSA_PKCS1_1024_8192_SHA512_FOR_LEGACY_USE_ONLY,
        _ => return None,
    })
}

fn verify(
    alg: Option<&'static dyn VerificationAlgorithm>,
    key: &Certificate,
    message: &[u8],
    signature: &[u8],
) -> Option<bool> {
    let key = key
        .tbs_certificate
        .subject_public_key_info
        .subject_public_key
        .raw_bytes();
    Some(
        UnparsedPublicKey::new(alg?, key)
            .verify(message, signature)
            .is_ok(),
    )
}

/// Whether `cert` signed `child` (its key verifies the child's signature over its TBS part).
fn issued(cert: &Certificate, child: &Certificate) -> Option<bool> {
    let tbs = child.tbs_certificate.to_der().ok()?;
    let alg = algorithm(&child.signature_algorithm.oid, "");
    verify(alg, cert, &tbs, child.signature.raw_bytes())
}

fn is_signer(cert: &Certificate, si: &SignerInfo) -> bool {
    match &si.sid {
        SignerIdentifier::IssuerAndSerialNumber(isn) => {
            cert.tbs_certificate.issuer == isn.issuer
                && cert.tbs_certificate.serial_number == isn.serial_number
        }
        SignerIdentifier::SubjectKeyIdentifier(_) => false,
    }
}

/// The Authenticode signature of PE `b`: None when it carries no certificate table; a
/// [`Signature`] with `valid: false` and its problems when one is there but does not hold.
pub fn check(b: &[u8]) -> Option<Signature> {
    let pe = Pe::read(b)?;
    pe.certificates?;
    let mut out = Signature {
        valid: false,
        signer: None,
        issuer: None,
        digest_algorithm: "unknown".into(),
        digest_matches: false,
        message_digest_matches: false,
        signer_signature_verified: None,
        chain: Vec::new(),
        problems: Vec::new(),
    };
    let entry = match AttributeCertificateIterator::new(&pe) {
        Ok(Some(mut it)) => it.next(),
        Ok(None) => None,
        Err(e) => {
            out.problems
                .push(format!("the certificate table is unreadable: {e}"));
            return Some(out);
        }
    };
    let Some(Ok(entry)) = entry else {
        out.problems
            .push("the certificate table holds no readable entry".into());
        return Some(out);
    };
    if let Err(e) = entry.get_authenticode_signature() {
        out.problems
            .push(format!("not an Authenticode signature: {e}"));
        return Some(out);
    }
    let signed = ContentInfo::from_der(trim_der(entry.data))
        .ok()
        .and_then(|ci| ci.content.decode_as::<SignedData>().ok());
    let Some(signed) = signed else {
        out.problems
            .push("the PKCS#7 SignedData is unreadable".into());
        return Some(out);
    };
    let indirect = signed
        .encap_content_info
        .econtent
        .as_ref()
        .and_then(|c| c.decode_as::<SpcIndirectDataContent>().ok());
    let (Some(indirect), Some(si)) = (indirect, signed.signer_infos.0.iter().next()) else {
        out.problems
            .push("no signed image digest or no signer".into());
        return Some(out);
    };
    // The image digest.
    let name = digest_name(&indirect.message_digest.digest_algorithm.oid);
    out.digest_algorithm = name.into();
    match image_digest(&pe, name) {
        Some(d) if d == indirect.message_digest.digest.as_bytes() => out.digest_matches = true,
        Some(_) => out.problems.push(
            "the signature does not match the file: its Authenticode digest differs from the signed one (changed after signing)".into(),
        ),
        None => out
            .problems
            .push(format!("the image digest ({name}) could not be computed")),
    }
    // The signed content's digest in the signed attributes.
    let signer_digest = digest_name(&si.digest_alg.oid);
    let content = signed
        .encap_content_info
        .econtent
        .as_ref()
        .map(|c| c.value().to_vec())
        .unwrap_or_default();
    let attribute = si.signed_attrs.as_ref().and_then(|attrs| {
        attrs
            .iter()
            .find(|a| a.oid == MESSAGE_DIGEST)
            .and_then(|a| a.values.iter().next())
            .and_then(|v| v.decode_as::<OctetString>().ok())
    });
    match (attribute, hash(signer_digest, &content)) {
        (Some(a), Some(h)) if a.as_bytes() == h.as_slice() => out.message_digest_matches = true,
        _ => out
            .problems
            .push("the signed attributes' messageDigest does not match the signed content".into()),
    }
    // The certificates, the signer's among them.
    let certs: Vec<&Certificate> = signed
        .certificates
        .as_ref()
        .map(|set| {
            set.0
                .iter()
                .filter_map(|c| match c {
                    cms::cert::CertificateChoices::Certificate(c) => Some(c),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let Some(signer) = certs.iter().copied().find(|c| is_signer(c, si)) else {
        out.problems
            .push("the signer's certificate is not in the signature".into());
        return Some(out);
    };
    out.signer = Some(signer.tbs_certificate.subject.to_string());
    out.issuer = Some(signer.tbs_certificate.issuer.to_string());
    let signed_attrs = si.signed_attrs.as_ref().and_then(|a| a.to_der().ok());
    out.signer_signature_verified = signed_attrs.and_then(|attrs| {
        verify(
            algorithm(&si.signature_algorithm.oid, signer_digest),
            signer,
            &attrs,
            si.signature.as_bytes(),
        )
    });
    match out.signer_signature_verified {
        Some(true) => {}
        Some(false) => out
            .problems
            .push("the signer's signature over its attributes does not verify".into()),
        None => out
            .problems
            .push("the signer's signature algorithm is not one this check knows".into()),
    }
    // The chain, from the signer up.
    let mut current = signer;
    for _ in 0..MAX_CHAIN {
        let tbs = &current.tbs_certificate;
        let self_signed = tbs.issuer == tbs.subject;
        let issuer = if self_signed {
            Some(current)
        } else {
            certs
                .iter()
                .copied()
                .find(|c| {
                    c.tbs_certificate.subject == tbs.issuer && issued(c, current) == Some(true)
                })
                .or_else(|| {
                    certs
                        .iter()
                        .copied()
                        .find(|c| c.tbs_certificate.subject == tbs.issuer)
                })
        };
        let verified = issuer.and_then(|i| issued(i, current));
        out.chain.push(ChainLink {
            subject: tbs.subject.to_string(),
            issuer: tbs.issuer.to_string(),
            not_before: tbs.validity.not_before.to_string(),
            not_after: tbs.validity.not_after.to_string(),
            verified,
        });
        if verified == Some(false) {
            out.problems.push(format!(
                "the chain breaks: {} is not signed by its issuer's key",
                tbs.subject
            ));
        }
        match issuer {
            Some(next) if !self_signed && verified == Some(true) => current = next,
            _ => break,
        }
    }
    // The signer must be vouched for by another certificate of the chain: a self-signed signer
    // proves only that the file was not changed since its author signed it.
    let vouched = signer.tbs_certificate.issuer != signer.tbs_certificate.subject
        && out.chain.first().is_some_and(|l| l.verified == Some(true));
    if !vouched && out.chain.first().is_some_and(|l| l.verified != Some(false)) {
        out.problems.push(
            "no certificate in the signature vouches for the signer (self-signed, or its issuer is missing)"
                .into(),
        );
    }
    out.valid = out.digest_matches
        && out.message_digest_matches
        && out.signer_signature_verified == Some(true)
        && vouched
        && out.chain.iter().all(|l| l.verified != Some(false));
    Some(out)
}

/// The DER value at the start of `b` without the padding after it (WIN_CERTIFICATE entries are
/// padded to 8 bytes).
fn trim_der(b: &[u8]) -> &[u8] {
    let Some(&first_len) = b.get(1) else {
        return b;
    };
    let (header, len) = if first_len < 0x80 {
        (2, usize::from(first_len))
    } else {
        let n = usize::from(first_len & 0x7F);
        let Some(bytes) = b.get(2..2 + n) else {
            return b;
        };
        (
            2 + n,
            bytes.iter().fold(0usize, |a, x| (a << 8) | usize::from(*x)),
        )
    };
    b.get(..header.saturating_add(len)).unwrap_or(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn der_padding_is_trimmed_and_odd_input_is_no_signature() {
        assert_eq!(trim_der(&[0x30, 0x02, 1, 2, 0, 0]), &[0x30, 0x02, 1, 2]);
        assert_eq!(trim_der(&[0x30, 0x81, 0x01, 9, 0]), &[0x30, 0x81, 0x01, 9]);
        assert!(check(b"MZ").is_none());
        assert!(check(b"not a program").is_none());
    }
}
