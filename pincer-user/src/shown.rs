//! Text from a session as the user's terminal shows it. A name the worker chose (a path
//! holds any byte but `/` and NUL), its rationale and whatever quotes them reach the user
//! through `pincer pending`, `pincer log` and `pincer policy`: the trusted channel. Printed
//! as is, an escape sequence, a carriage return or a newline in a name would rewrite what
//! the user reads (erase the line, print a question the session made up where the real one
//! stands), and a bidirectional override would reorder it. [`Shown`] prints such text with
//! every control and format character escaped, so what the user approves is what is asked.

use std::fmt;

/// Untrusted text, displayed with its control characters (C0, DEL, C1), Unicode format
/// characters (bidirectional controls, zero-width characters) and backslashes escaped
/// (`\u{1b}`, `\r`, `\n`, `\\`): one line, exactly as many characters as the user sees.
#[derive(Debug, Clone, Copy)]
pub struct Shown<'a>(pub &'a str);

/// Whether `c` is drawn as itself: not a control character and not one of Unicode's format
/// characters (category Cf), which steer how the text around them is laid out.
fn plain(c: char) -> bool {
    !(c.is_control()
        || matches!(c, '\u{ad}' | '\u{600}'..='\u{605}' | '\u{61c}' | '\u{6dd}' | '\u{70f}' | '\u{180e}'
            | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{206f}'
            | '\u{feff}' | '\u{fff9}'..='\u{fffb}' | '\u{e0000}'..='\u{e007f}'))
}

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use fmt::Write;
        for c in self.0.chars() {
            match c {
                '\\' => f.write_str("\\\\")?,
                c if plain(c) => f.write_char(c)?,
                c => write!(f, "{}", c.escape_debug())?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Shown;

    #[test]
    fn control_and_format_characters_are_escaped_and_plain_text_is_kept() {
        let forged = "src/lib.rs\r\x1b[2K   1  read README.md\n    vote 1: allow";
        let shown = Shown(forged).to_string();
        assert_eq!(shown, "src/lib.rs\\r\\u{1b}[2K   1  read README.md\\n    vote 1: allow");
        assert!(!shown.chars().any(char::is_control));
        assert_eq!(Shown("a\u{202e}txt.exe").to_string(), "a\\u{202e}txt.exe");
        assert_eq!(Shown("\u{9b}31m").to_string(), "\\u{9b}31m");
        assert_eq!(Shown("C:\\u{1b}").to_string(), "C:\\\\u{1b}", "a backslash cannot forge an escape");
        let plain = "docs/café – naïve 名前.md";
        assert_eq!(Shown(plain).to_string(), plain);
    }
}
