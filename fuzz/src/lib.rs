//! Helpers shared by the fuzz targets.

/// Splits fuzz input into parts at each `0xFF` byte, which never occurs in UTF-8 text, so
/// that one input can carry several frames, header fields or query pairs.
pub fn parts(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    data.split(|&byte| byte == 0xFF)
}

/// [`parts`] that are UTF-8 text; other parts are skipped.
pub fn text_parts(data: &[u8]) -> impl Iterator<Item = &str> {
    parts(data).filter_map(|part| std::str::from_utf8(part).ok())
}
