//! Byte sizes on the command line: `2M`, `512K`, `1G`, `4096`, `0`.
//!
//! Suffixes are binary (K = 1024) and may be written `K`, `KB`, `KiB` in any
//! case, because that is what people type for prefetch sizes; the papers' "2 MB"
//! prefetch is 2 MiB here.

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SizeError {
    #[error("size {0:?} is empty")]
    Empty(String),
    #[error("size {0:?} is not a number with an optional K, M or G suffix (for example 2M)")]
    Malformed(String),
    #[error("size {0:?} does not fit in 64 bits")]
    Overflow(String),
}

/// Parses a size; see the module comment for the accepted forms.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(SizeError::Empty(text.to_string()));
    }
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(digits_end);
    if digits.is_empty() {
        return Err(SizeError::Malformed(text.to_string()));
    }
    let number: u64 = digits
        .parse()
        .map_err(|_| SizeError::Overflow(text.to_string()))?;
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(SizeError::Malformed(text.to_string())),
    };
    number
        .checked_mul(1u64 << shift)
        .ok_or_else(|| SizeError::Overflow(text.to_string()))
}

/// Short human form for tables: `2.0M`, `512K`, `17`.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)];
    for (unit, scale) in UNITS {
        if bytes >= scale {
            return format!("{:.1}{unit}", bytes as f64 / scale as f64);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_forms() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("2M"), Ok(2 << 20));
        assert_eq!(parse_size("2MiB"), Ok(2 << 20));
        assert_eq!(parse_size("512k"), Ok(512 << 10));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
    }

    #[test]
    fn rejected_forms_name_the_input() {
        assert_eq!(parse_size(""), Err(SizeError::Empty(String::new())));
        assert_eq!(parse_size("M"), Err(SizeError::Malformed("M".into())));
        assert_eq!(parse_size("2X"), Err(SizeError::Malformed("2X".into())));
        assert_eq!(parse_size("-1"), Err(SizeError::Malformed("-1".into())));
        assert_eq!(
            parse_size("99999999999999999999G"),
            Err(SizeError::Overflow("99999999999999999999G".into()))
        );
        assert_eq!(
            parse_size("17179869184G"),
            Err(SizeError::Overflow("17179869184G".into()))
        );
    }
}
