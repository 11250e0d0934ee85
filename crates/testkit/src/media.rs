//! Small images of the four formats `read_media` serves, made in code so that no binary
//! fixture is checked in.
//!
//! [`png`] and [`gif`] are whole, decodable images (a grey PNG with its zlib stream stored
//! uncompressed, a two-colour GIF whose LZW stream clears before every pixel). [`jpeg`] and
//! [`webp`] are headers only (a JPEG's start of image, JFIF segment, start of frame and end of
//! image; a WebP lossless chunk header): what `read_media` reads of a file, its type and its
//! width and height, is exact; a viewer would find no pixels.

/// A decodable 8-bit greyscale PNG of `width` x `height` (every pixel 0x80).
pub fn png(width: u32, height: u32) -> Vec<u8> {
    let mut raw = Vec::new();
    for _ in 0..height {
        raw.push(0); // filter: none
        raw.extend(std::iter::repeat_n(0x80u8, width as usize));
    }
    // zlib: a header, stored blocks of at most 65,535 bytes, the Adler-32 of the data.
    let mut z = vec![0x78, 0x01];
    let mut blocks = raw.chunks(65_535).peekable();
    if blocks.peek().is_none() {
        z.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(block) = blocks.next() {
        let last = blocks.peek().is_none();
        let len = block.len() as u16;
        z.push(u8::from(last));
        z.extend_from_slice(&len.to_le_bytes());
        z.extend_from_slice(&(!len).to_le_bytes());
        z.extend_from_slice(block);
    }
    z.extend_from_slice(&adler32(&raw).to_be_bytes());

    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 0, 0, 0, 0]); // depth 8, greyscale, deflate, filter 0, no interlace

    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &z);
    chunk(&mut out, b"IEND", &[]);
    out
}

/// A decodable GIF89a of `width` x `height`, all pixels of the first of its two colours.
pub fn gif(width: u16, height: u16) -> Vec<u8> {
    let mut out = b"GIF89a".to_vec();
    out.extend_from_slice(&width.to_le_bytes());
    out.extend_from_slice(&height.to_le_bytes());
    // A global colour table of 2 entries, background 0, no aspect ratio; black and white.
    out.extend_from_slice(&[0x80, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff]);
    out.push(0x2c);
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&width.to_le_bytes());
    out.extend_from_slice(&height.to_le_bytes());
    out.push(0);
    // LZW with a minimum code size of 2: clear is 4, end is 5, codes are 3 bits wide. A clear
    // before every pixel keeps them 3 bits wide.
    out.push(2);
    let pixels = usize::from(width) * usize::from(height);
    let mut codes = Vec::with_capacity(2 * pixels + 1);
    for _ in 0..pixels {
        codes.extend_from_slice(&[4u8, 0]);
    }
    codes.push(5);
    let mut data = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for code in codes {
        acc |= u32::from(code) << bits;
        bits += 3;
        while bits >= 8 {
            data.push(acc as u8);
            acc >>= 8;
            bits -= 8;
        }
    }
    if bits > 0 {
        data.push(acc as u8);
    }
    for block in data.chunks(255) {
        out.push(block.len() as u8);
        out.extend_from_slice(block);
    }
    out.push(0);
    out.push(0x3b);
    out
}

/// A JPEG header of `width` x `height`: start of image, a JFIF segment, a baseline start of
/// frame (one component), end of image.
pub fn jpeg(width: u16, height: u16) -> Vec<u8> {
    let mut out = vec![0xff, 0xd8];
    out.extend_from_slice(&[0xff, 0xe0, 0x00, 0x10]);
    out.extend_from_slice(b"JFIF\0");
    out.extend_from_slice(&[1, 1, 0, 0, 1, 0, 1, 0, 0]);
    out.extend_from_slice(&[0xff, 0xc0, 0x00, 0x0b, 8]);
    out.extend_from_slice(&height.to_be_bytes());
    out.extend_from_slice(&width.to_be_bytes());
    out.extend_from_slice(&[1, 1, 0x11, 0]);
    out.extend_from_slice(&[0xff, 0xd9]);
    out
}

/// A WebP (lossless, `VP8L`) header of `width` x `height`, each 1 to 16,384.
pub fn webp(width: u32, height: u32) -> Vec<u8> {
    let bits = (width - 1) | ((height - 1) << 14);
    let mut payload = vec![0x2f];
    payload.extend_from_slice(&bits.to_le_bytes());
    let mut body = b"WEBP".to_vec();
    chunk_le(&mut body, b"VP8L", &payload);
    let mut out = b"RIFF".to_vec();
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// `image` followed by zero bytes up to `len` bytes in all (trailing bytes after an image
/// change nothing a header says).
pub fn padded(mut image: Vec<u8>, len: usize) -> Vec<u8> {
    assert!(image.len() <= len, "the image is already longer");
    image.resize(len, 0);
    image
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

/// A RIFF chunk: little-endian length, padded to an even size.
fn chunk_le(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(kind);
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(data);
    if data.len() % 2 == 1 {
        out.push(0);
    }
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in data {
        a = (a + u32::from(byte)) % 65_521;
        b = (b + a) % 65_521;
    }
    (b << 16) | a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_match_known_values() {
        // The check values of CRC-32 (IEEE) and Adler-32 for "123456789", and the CRC of
        // an IEND chunk as every PNG ends with it.
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(adler32(b"123456789"), 0x091e_01de);
        assert_eq!(crc32(b"IEND"), 0xae42_6082);
    }

    #[test]
    fn headers_hold_the_sizes_asked_for() {
        let p = png(3, 2);
        assert_eq!(&p[16..24], &[0, 0, 0, 3, 0, 0, 0, 2]);
        assert!(p.ends_with(b"IEND\xae\x42\x60\x82"));
        let g = gif(3, 2);
        assert_eq!(&g[6..10], &[3, 0, 2, 0]);
        assert_eq!(g.last(), Some(&0x3b));
        let w = webp(3, 2);
        assert_eq!(&w[..4], b"RIFF");
        assert_eq!(w.len(), 26);
        assert_eq!(
            u32::from_le_bytes(w[4..8].try_into().unwrap()) as usize,
            w.len() - 8
        );
        assert_eq!(jpeg(3, 2)[..3], [0xff, 0xd8, 0xff]);
    }
}
