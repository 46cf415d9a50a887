//! SQLCipher's crypto provider, in Rust: AES-256-CBC from the `aes` crate,
//! HMAC, PBKDF2 and randomness from `ring`.
//!
//! # Why not OpenSSL
//!
//! SQLCipher's default provider is OpenSSL's libcrypto, and with it the
//! daemon mapped 4.6 MB of library of which 3.5 MB stayed resident (the
//! kernel maps the pages around every page a process touches, and OpenSSL
//! 3's start-up touches its providers' tables across the whole file): the
//! largest library in a daemon whose whole resident size is ~18 MB, to do
//! four things the daemon already has code for or can have in a few
//! kilobytes. The OpenSSL provider also fetched an `EVP_MAC` by name and
//! built a context for every page it read or wrote.
//!
//! # Same file format
//!
//! Nothing about the file changes: the algorithms are SQLCipher 4's
//! (AES-256-CBC without padding per page, a random IV per page write,
//! HMAC-SHA512 over the page and its IV, PBKDF2-HMAC-SHA512 for the HMAC
//! key; SHA1 and SHA256 for older settings), computed by other code. A
//! database written with the OpenSSL provider opens with this one and the
//! other way round: `tests/it/upgrade.rs` opens a file written by 0.1.0
//! (OpenSSL) and reads every row back, and the unit tests check the cipher
//! against NIST's vectors.
//!
//! # How SQLCipher finds it
//!
//! `.cargo/config.toml` builds the bundled SQLCipher with
//! `-DSQLCIPHER_CRYPTO_CUSTOM=contextd_sqlcipher_provider`: on its first
//! use SQLCipher calls [`contextd_sqlcipher_provider`] to fill in its
//! provider table. A build without that flag falls back to OpenSSL and
//! still reads and writes the same files; [`in_use`] tells which one a
//! connection has (`PRAGMA cipher_provider`), and the store logs it.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::num::NonZeroU32;

use aes::Aes256;
use aes::cipher::{BlockDecrypt, BlockEncrypt, KeyInit};
use ring::rand::SecureRandom;
use zeroize::Zeroize;

/// What `PRAGMA cipher_provider` answers with this provider.
pub(crate) const NAME: &str = "contextd";
const NAME_C: &CStr = c"contextd";
const VERSION_C: &CStr = c"ring 0.17, aes 0.8";
const CIPHER_C: &CStr = c"aes-256-cbc";

const SQLITE_OK: c_int = 0;
const SQLITE_ERROR: c_int = 1;

// sqlite3.c (SQLCipher 4): the provider's constants.
const CIPHER_DECRYPT: c_int = 0;
const CIPHER_ENCRYPT: c_int = 1;
const HMAC_SHA1: c_int = 0;
const HMAC_SHA256: c_int = 1;
const HMAC_SHA512: c_int = 2;

const KEY_SZ: usize = 32;
const BLOCK_SZ: usize = 16;

/// `struct sqlcipher_provider` of SQLCipher 4.x (sqlite3.c), field for
/// field; SQLCipher allocates it and this module fills it in.
#[repr(C)]
pub(crate) struct SqlcipherProvider {
    init: Option<unsafe extern "C" fn() -> c_int>,
    shutdown: Option<unsafe extern "C" fn()>,
    get_provider_name: Option<unsafe extern "C" fn(*mut c_void) -> *const c_char>,
    add_random: Option<unsafe extern "C" fn(*mut c_void, *const c_void, c_int) -> c_int>,
    random: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, c_int) -> c_int>,
    hmac: Option<
        unsafe extern "C" fn(
            *mut c_void,
            c_int,
            *const u8,
            c_int,
            *const u8,
            c_int,
            *const u8,
            c_int,
            *mut u8,
        ) -> c_int,
    >,
    kdf: Option<
        unsafe extern "C" fn(
            *mut c_void,
            c_int,
            *const u8,
            c_int,
            *const u8,
            c_int,
            c_int,
            c_int,
            *mut u8,
        ) -> c_int,
    >,
    cipher: Option<
        unsafe extern "C" fn(
            *mut c_void,
            c_int,
            *const u8,
            c_int,
            *const u8,
            *const u8,
            c_int,
            *mut u8,
        ) -> c_int,
    >,
    get_cipher: Option<unsafe extern "C" fn(*mut c_void) -> *const c_char>,
    get_key_sz: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
    get_iv_sz: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
    get_block_sz: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
    get_hmac_sz: Option<unsafe extern "C" fn(*mut c_void, c_int) -> c_int>,
    ctx_init: Option<unsafe extern "C" fn(*mut *mut c_void) -> c_int>,
    ctx_free: Option<unsafe extern "C" fn(*mut *mut c_void) -> c_int>,
    fips_status: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
    get_provider_version: Option<unsafe extern "C" fn(*mut c_void) -> *const c_char>,
    next: *mut SqlcipherProvider,
}

/// Called by SQLCipher (`SQLCIPHER_CRYPTO_CUSTOM`) once, to fill in the
/// provider it then registers as its default.
///
/// # Safety
///
/// `p` is SQLCipher's freshly allocated provider (or null, refused).
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn contextd_sqlcipher_provider(p: *mut SqlcipherProvider) -> c_int {
    if p.is_null() {
        return SQLITE_ERROR;
    }
    let provider = SqlcipherProvider {
        init: Some(init),
        shutdown: Some(shutdown),
        get_provider_name: Some(provider_name),
        add_random: Some(add_random),
        random: Some(random),
        hmac: Some(hmac),
        kdf: Some(kdf),
        cipher: Some(cipher),
        get_cipher: Some(cipher_name),
        get_key_sz: Some(key_sz),
        get_iv_sz: Some(block_sz),
        get_block_sz: Some(block_sz),
        get_hmac_sz: Some(hmac_sz),
        ctx_init: Some(ctx_init),
        ctx_free: Some(ctx_free),
        fips_status: Some(fips_status),
        get_provider_version: Some(provider_version),
        next: std::ptr::null_mut(),
    };
    // SAFETY: SQLCipher hands a writable, aligned allocation of
    // `sizeof(sqlcipher_provider)`, which this struct mirrors.
    unsafe { p.write(provider) };
    SQLITE_OK
}

/// Keeps [`contextd_sqlcipher_provider`] in every binary that links the
/// store: SQLCipher's reference to it comes from a static library linked
/// after this crate, which the linker would not search back for it.
pub(crate) fn link() -> usize {
    std::hint::black_box(contextd_sqlcipher_provider as *const () as usize)
}

/// Whether a connection's SQLCipher uses this provider (the value of
/// `PRAGMA cipher_provider`).
pub(crate) fn in_use(cipher_provider: &str) -> bool {
    cipher_provider == NAME
}

unsafe extern "C" fn init() -> c_int {
    SQLITE_OK
}

unsafe extern "C" fn shutdown() {}

unsafe extern "C" fn provider_name(_: *mut c_void) -> *const c_char {
    NAME_C.as_ptr()
}

unsafe extern "C" fn provider_version(_: *mut c_void) -> *const c_char {
    VERSION_C.as_ptr()
}

unsafe extern "C" fn cipher_name(_: *mut c_void) -> *const c_char {
    CIPHER_C.as_ptr()
}

unsafe extern "C" fn key_sz(_: *mut c_void) -> c_int {
    KEY_SZ as c_int
}

unsafe extern "C" fn block_sz(_: *mut c_void) -> c_int {
    BLOCK_SZ as c_int
}

unsafe extern "C" fn hmac_sz(_: *mut c_void, algorithm: c_int) -> c_int {
    hmac_algorithm(algorithm).map_or(0, |a| a.digest_algorithm().output_len() as c_int)
}

unsafe extern "C" fn fips_status(_: *mut c_void) -> c_int {
    0
}

/// No per-connection state: every call is self-contained.
unsafe extern "C" fn ctx_init(ctx: *mut *mut c_void) -> c_int {
    if !ctx.is_null() {
        // SAFETY: SQLCipher passes the address of its context pointer.
        unsafe { ctx.write(std::ptr::null_mut()) };
    }
    SQLITE_OK
}

unsafe extern "C" fn ctx_free(_: *mut *mut c_void) -> c_int {
    SQLITE_OK
}

/// Entropy SQLCipher offers (`PRAGMA cipher_add_random`): the kernel's
/// generator, which `random` reads, needs none.
unsafe extern "C" fn add_random(_: *mut c_void, _: *const c_void, _: c_int) -> c_int {
    SQLITE_OK
}

/// `length` bytes from the kernel's generator (getrandom): the IV of every
/// page written, the salt of a new database.
unsafe extern "C" fn random(_: *mut c_void, buffer: *mut c_void, length: c_int) -> c_int {
    let Some(out) = (unsafe { out_slice(buffer.cast(), length) }) else {
        return SQLITE_ERROR;
    };
    match ring::rand::SystemRandom::new().fill(out) {
        Ok(()) => SQLITE_OK,
        Err(_) => SQLITE_ERROR,
    }
}

/// HMAC of `in || in2` (`in2` may be absent) into `out`, which holds
/// [`hmac_sz`] bytes.
#[allow(clippy::too_many_arguments)] // SQLCipher's signature
unsafe extern "C" fn hmac(
    _: *mut c_void,
    algorithm: c_int,
    key: *const u8,
    key_sz: c_int,
    input: *const u8,
    input_sz: c_int,
    input2: *const u8,
    input2_sz: c_int,
    out: *mut u8,
) -> c_int {
    let Some(algorithm) = hmac_algorithm(algorithm) else {
        return SQLITE_ERROR;
    };
    // SAFETY (all three): SQLCipher's buffers of the sizes it passes.
    let (Some(key), Some(input)) = (unsafe { in_slice(key, key_sz) }, unsafe {
        in_slice(input, input_sz)
    }) else {
        return SQLITE_ERROR;
    };
    let mut ctx = ring::hmac::Context::with_key(&ring::hmac::Key::new(algorithm, key));
    ctx.update(input);
    if !input2.is_null() {
        let Some(input2) = (unsafe { in_slice(input2, input2_sz) }) else {
            return SQLITE_ERROR;
        };
        ctx.update(input2);
    }
    let tag = ctx.sign();
    let tag = tag.as_ref();
    if out.is_null() {
        return SQLITE_ERROR;
    }
    // SAFETY: `out` holds get_hmac_sz(algorithm) bytes, the tag's length.
    unsafe { std::ptr::copy_nonoverlapping(tag.as_ptr(), out, tag.len()) };
    SQLITE_OK
}

/// PBKDF2 with HMAC of `algorithm`, `workfactor` iterations, `key_sz`
/// bytes into `key`.
#[allow(clippy::too_many_arguments)] // SQLCipher's signature
unsafe extern "C" fn kdf(
    _: *mut c_void,
    algorithm: c_int,
    pass: *const u8,
    pass_sz: c_int,
    salt: *const u8,
    salt_sz: c_int,
    workfactor: c_int,
    key_sz: c_int,
    key: *mut u8,
) -> c_int {
    let algorithm = match algorithm {
        HMAC_SHA1 => ring::pbkdf2::PBKDF2_HMAC_SHA1,
        HMAC_SHA256 => ring::pbkdf2::PBKDF2_HMAC_SHA256,
        HMAC_SHA512 => ring::pbkdf2::PBKDF2_HMAC_SHA512,
        _ => return SQLITE_ERROR,
    };
    let Some(iterations) = u32::try_from(workfactor).ok().and_then(NonZeroU32::new) else {
        return SQLITE_ERROR;
    };
    // SAFETY (all three): SQLCipher's buffers of the sizes it passes.
    let (Some(pass), Some(salt), Some(key)) = (
        unsafe { in_slice(pass, pass_sz) },
        unsafe { in_slice(salt, salt_sz) },
        unsafe { out_slice(key, key_sz) },
    ) else {
        return SQLITE_ERROR;
    };
    if key.is_empty() {
        return SQLITE_ERROR;
    }
    ring::pbkdf2::derive(algorithm, iterations, salt, pass, key);
    SQLITE_OK
}

/// AES-256-CBC of `in_sz` bytes (whole blocks, no padding) from `input` to
/// `out` with `iv`. SQLCipher passes distinct page buffers; the blocks are
/// still copied in and out one at a time, so that even `input == out`
/// would be read before it is written.
#[allow(clippy::too_many_arguments)] // SQLCipher's signature
unsafe extern "C" fn cipher(
    _: *mut c_void,
    mode: c_int,
    key: *const u8,
    key_sz: c_int,
    iv: *const u8,
    input: *const u8,
    in_sz: c_int,
    out: *mut u8,
) -> c_int {
    if usize::try_from(key_sz).ok() != Some(KEY_SZ) || iv.is_null() || input.is_null() {
        return SQLITE_ERROR;
    }
    let Ok(len) = usize::try_from(in_sz) else {
        return SQLITE_ERROR;
    };
    if len % BLOCK_SZ != 0 || out.is_null() {
        return SQLITE_ERROR;
    }
    let encrypt = match mode {
        CIPHER_ENCRYPT => true,
        CIPHER_DECRYPT => false,
        _ => return SQLITE_ERROR,
    };
    let mut key_bytes = [0u8; KEY_SZ];
    let mut chain = [0u8; BLOCK_SZ];
    // SAFETY: the key and IV are SQLCipher's buffers of KEY_SZ and
    // BLOCK_SZ bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(key, key_bytes.as_mut_ptr(), KEY_SZ);
        std::ptr::copy_nonoverlapping(iv, chain.as_mut_ptr(), BLOCK_SZ);
    }
    let aes = Aes256::new(&aes::cipher::Key::<Aes256>::from(key_bytes));
    // The copies of the key and of the last block leave no trace on the
    // stack (volatile writes); `aes`'s own key schedule wipes itself.
    key_bytes.zeroize();
    for i in 0..len / BLOCK_SZ {
        let mut block = [0u8; BLOCK_SZ];
        // SAFETY: block i lies within the `len` bytes of `input`.
        unsafe {
            std::ptr::copy_nonoverlapping(input.add(i * BLOCK_SZ), block.as_mut_ptr(), BLOCK_SZ)
        };
        if encrypt {
            xor(&mut block, &chain);
            let mut b = aes::Block::from(block);
            aes.encrypt_block(&mut b);
            block = b.into();
            chain = block;
        } else {
            let mut b = aes::Block::from(block);
            aes.decrypt_block(&mut b);
            let ciphertext = block;
            block = b.into();
            xor(&mut block, &chain);
            chain = ciphertext;
        }
        // SAFETY: block i lies within the `len` bytes of `out`.
        unsafe { std::ptr::copy_nonoverlapping(block.as_ptr(), out.add(i * BLOCK_SZ), BLOCK_SZ) };
    }
    chain.zeroize();
    SQLITE_OK
}

fn xor(block: &mut [u8; BLOCK_SZ], with: &[u8; BLOCK_SZ]) {
    for (b, w) in block.iter_mut().zip(with) {
        *b ^= w;
    }
}

fn hmac_algorithm(algorithm: c_int) -> Option<ring::hmac::Algorithm> {
    match algorithm {
        HMAC_SHA1 => Some(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY),
        HMAC_SHA256 => Some(ring::hmac::HMAC_SHA256),
        HMAC_SHA512 => Some(ring::hmac::HMAC_SHA512),
        _ => None,
    }
}

/// A read-only view of a C buffer; `None` for a negative size or a null
/// pointer with a size. A null pointer with size 0 is the empty slice.
///
/// # Safety
///
/// `p` points to `len` readable bytes for the call's duration.
unsafe fn in_slice<'a>(p: *const u8, len: c_int) -> Option<&'a [u8]> {
    let len = usize::try_from(len).ok()?;
    if len == 0 {
        return Some(&[]);
    }
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller's promise.
    Some(unsafe { std::slice::from_raw_parts(p, len) })
}

/// A writable view of a C buffer, as [`in_slice`].
///
/// # Safety
///
/// `p` points to `len` writable bytes nothing else reads during the call.
unsafe fn out_slice<'a>(p: *mut u8, len: c_int) -> Option<&'a mut [u8]> {
    let len = usize::try_from(len).ok()?;
    if len == 0 {
        return Some(&mut []);
    }
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller's promise.
    Some(unsafe { std::slice::from_raw_parts_mut(p, len) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    }

    fn run(mode: c_int, key: &[u8], iv: &[u8], input: &[u8]) -> (c_int, Vec<u8>) {
        let mut out = vec![0u8; input.len()];
        // SAFETY: buffers of the sizes passed.
        let rc = unsafe {
            cipher(
                std::ptr::null_mut(),
                mode,
                key.as_ptr(),
                key.len() as c_int,
                iv.as_ptr(),
                input.as_ptr(),
                input.len() as c_int,
                out.as_mut_ptr(),
            )
        };
        (rc, out)
    }

    /// NIST SP 800-38A, F.2.5 (CBC-AES256.Encrypt) and F.2.6 (Decrypt).
    #[test]
    fn aes_256_cbc_matches_nist_sp800_38a() {
        let key = unhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4");
        let iv = unhex("000102030405060708090a0b0c0d0e0f");
        let plain = unhex(concat!(
            "6bc1bee22e409f96e93d7e117393172a",
            "ae2d8a571e03ac9c9eb76fac45af8e51",
            "30c81c46a35ce411e5fbc1191a0a52ef",
            "f69f2445df4f9b17ad2b417be66c3710"
        ));
        let cipher_text = unhex(concat!(
            "f58c4c04d6e5f1ba779eabfb5f7bfbd6",
            "9cfc4e967edb808d679f777bc6702c7d",
            "39f23369a9d9bacfa530e26304231461",
            "b2eb05e2c39be9fcda6c19078c6a9d1b"
        ));
        assert_eq!(
            run(CIPHER_ENCRYPT, &key, &iv, &plain),
            (SQLITE_OK, cipher_text.clone())
        );
        assert_eq!(
            run(CIPHER_DECRYPT, &key, &iv, &cipher_text),
            (SQLITE_OK, plain)
        );
    }

    #[test]
    fn partial_blocks_short_keys_and_unknown_modes_are_refused() {
        let key = [7u8; 32];
        let iv = [1u8; 16];
        assert_eq!(run(CIPHER_ENCRYPT, &key, &iv, &[0u8; 17]).0, SQLITE_ERROR);
        assert_eq!(
            run(CIPHER_ENCRYPT, &key[..16], &iv, &[0u8; 16]).0,
            SQLITE_ERROR
        );
        assert_eq!(run(5, &key, &iv, &[0u8; 16]).0, SQLITE_ERROR);
        assert_eq!(run(5, &key, &iv, &[]).0, SQLITE_ERROR);
        assert_eq!(run(CIPHER_ENCRYPT, &key, &iv, &[]), (SQLITE_OK, vec![]));
    }

    /// RFC 4231 test case 2 (HMAC-SHA512 of "what do ya want for
    /// nothing?" keyed "Jefe"), fed as two parts the way SQLCipher feeds a
    /// page and its number.
    #[test]
    fn hmac_sha512_of_two_parts_matches_rfc4231() {
        let mut out = [0u8; 64];
        let (a, b) = b"what do ya want for nothing?".split_at(10);
        // SAFETY: buffers of the sizes passed.
        let rc = unsafe {
            hmac(
                std::ptr::null_mut(),
                HMAC_SHA512,
                b"Jefe".as_ptr(),
                4,
                a.as_ptr(),
                a.len() as c_int,
                b.as_ptr(),
                b.len() as c_int,
                out.as_mut_ptr(),
            )
        };
        assert_eq!(rc, SQLITE_OK);
        assert_eq!(
            out.to_vec(),
            unhex(concat!(
                "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554",
                "9758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"
            ))
        );
        // SAFETY: as above.
        assert_eq!(unsafe { hmac_sz(std::ptr::null_mut(), HMAC_SHA512) }, 64);
        assert_eq!(unsafe { hmac_sz(std::ptr::null_mut(), HMAC_SHA1) }, 20);
        assert_eq!(unsafe { hmac_sz(std::ptr::null_mut(), 9) }, 0);
    }

    /// RFC 6070's second vector (PBKDF2-HMAC-SHA1, 2 iterations), the
    /// kind of call SQLCipher makes for a raw key's HMAC key.
    #[test]
    fn pbkdf2_matches_rfc6070_and_refuses_zero_iterations() {
        let mut key = [0u8; 20];
        let call = |iter: c_int, key: &mut [u8]| unsafe {
            // SAFETY: buffers of the sizes passed.
            kdf(
                std::ptr::null_mut(),
                HMAC_SHA1,
                b"password".as_ptr(),
                8,
                b"salt".as_ptr(),
                4,
                iter,
                key.len() as c_int,
                key.as_mut_ptr(),
            )
        };
        assert_eq!(call(2, &mut key), SQLITE_OK);
        assert_eq!(
            key.to_vec(),
            unhex("ea6c014dc72d6f8ccd1ed92ace1d41f0d8de8957")
        );
        assert_eq!(call(0, &mut key), SQLITE_ERROR);
        assert_eq!(call(-1, &mut key), SQLITE_ERROR);
    }

    #[test]
    fn random_fills_and_refuses_bad_sizes() {
        let mut a = [0u8; 80];
        let mut b = [0u8; 80];
        // SAFETY: buffers of the sizes passed.
        unsafe {
            assert_eq!(
                random(std::ptr::null_mut(), a.as_mut_ptr().cast(), 80),
                SQLITE_OK
            );
            assert_eq!(
                random(std::ptr::null_mut(), b.as_mut_ptr().cast(), 80),
                SQLITE_OK
            );
            assert_eq!(
                random(std::ptr::null_mut(), b.as_mut_ptr().cast(), -1),
                SQLITE_ERROR
            );
        }
        assert_ne!(a, b);
        assert_ne!(a, [0u8; 80]);
    }
}
