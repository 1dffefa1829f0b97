//! Kafka's `ssl.principal.mapping.rules`, the subset Ferry supports: how the subject of a
//! client certificate becomes the principal name of a Kafka connection on a TLS listener
//! without SASL.
//!
//! Rules are tried in order; the first whose pattern matches the whole subject (RFC 2253,
//! `CN=alice,OU=eng,O=Example`) gives the name:
//! - `RULE:pattern/replacement/` — a regular expression (Rust's `regex` syntax, which
//!   agrees with Java's for the usual patterns) and a replacement where `$1` names a group;
//!   `/L` or `/U` after it lower- or upper-cases the result; a `/` inside is written `\/`;
//! - `DEFAULT` — the subject itself.
//!
//! Rules are separated by commas (a comma inside a rule belongs to it), as in Kafka:
//! `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT`. A subject no rule matches has no
//! principal (the connection is refused).
//!
//! A leaf: it imports nothing of Ferry's, so the configuration can validate rules.

use regex::Regex;

/// The rules when none are configured: the subject itself.
pub const DEFAULT_RULES: &str = "DEFAULT";

/// One mapping rule.
#[derive(Debug, Clone)]
enum Rule {
    /// The subject itself.
    Default,
    /// A pattern and its replacement.
    Pattern {
        /// The pattern, anchored at both ends.
        regex: Regex,
        /// The replacement in `regex`'s syntax (`${1}`).
        replacement: String,
        /// Case applied to the result.
        case: Case,
    },
}

/// Case applied to a rule's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    /// As replaced.
    Keep,
    /// `/L`.
    Lower,
    /// `/U`.
    Upper,
}

/// A parsed `ssl.principal.mapping.rules` list.
#[derive(Debug, Clone)]
pub struct PrincipalRules {
    rules: Vec<Rule>,
}

impl PrincipalRules {
    /// Parses a rule list.
    ///
    /// # Errors
    /// A sentence naming the rule (by position, from 1) and what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut rules = Vec::new();
        let mut rest = text.trim_start();
        while !rest.is_empty() {
            let n = rules.len() + 1;
            let (rule, after) = if let Some(after) = rest.strip_prefix("DEFAULT") {
                (Rule::Default, after)
            } else if let Some(body) = rest.strip_prefix("RULE:") {
                parse_rule(body).map_err(|why| format!("rule {n}: {why}"))?
            } else {
                return Err(format!(
                    "rule {n} is neither RULE:pattern/replacement/ nor DEFAULT"
                ));
            };
            rules.push(rule);
            let after = after.trim_start();
            rest = match after.strip_prefix(',') {
                Some(next) => next.trim_start(),
                None if after.is_empty() => after,
                None => return Err(format!("rule {n} is followed by text that is not a comma")),
            };
        }
        if rules.is_empty() {
            return Err("there are no rules (use DEFAULT for the subject itself)".to_owned());
        }
        Ok(Self { rules })
    }

    /// The principal of a certificate with `subject`, if a rule matches it.
    pub fn apply(&self, subject: &str) -> Option<String> {
        self.rules.iter().find_map(|rule| match rule {
            Rule::Default => Some(subject.to_owned()),
            Rule::Pattern {
                regex,
                replacement,
                case,
            } => regex.is_match(subject).then(|| {
                let name = regex.replace(subject, replacement.as_str()).into_owned();
                match case {
                    Case::Keep => name,
                    Case::Lower => name.to_lowercase(),
                    Case::Upper => name.to_uppercase(),
                }
            }),
        })
    }
}

/// Parses `pattern/replacement/[LU]` after `RULE:`; returns the rule and the text after it.
fn parse_rule(body: &str) -> Result<(Rule, &str), String> {
    let (pattern, rest) = until_slash(body).ok_or("has no / after its pattern")?;
    let (replacement, rest) = until_slash(rest).ok_or("has no / after its replacement")?;
    let (case, rest) = match rest.chars().next() {
        Some('L') => (Case::Lower, &rest[1..]),
        Some('U') => (Case::Upper, &rest[1..]),
        _ => (Case::Keep, rest),
    };
    let regex = Regex::new(&format!("^(?:{pattern})$"))
        .map_err(|e| format!("its pattern is not a regular expression ({e})"))?;
    Ok((
        Rule::Pattern {
            regex,
            replacement: java_replacement(&replacement),
            case,
        },
        rest,
    ))
}

/// The text up to the first `/` not written `\/` (unescaped), and the text after that `/`.
fn until_slash(text: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' if text[i + 1..].starts_with('/') => {
                out.push('/');
                chars.next();
            }
            '/' => return Some((out, &text[i + 1..])),
            c => out.push(c),
        }
    }
    None
}

/// Java's `$1` as `regex`'s `${1}` (so `$1x` is group 1 and `x`, as in Java).
fn java_replacement(replacement: &str) -> String {
    let mut out = String::new();
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push_str("${");
            while let Some(d) = chars.next_if(char::is_ascii_digit) {
                out.push(d);
            }
            out.push('}');
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_documented_example_maps_service_users_and_falls_back() {
        let rules = PrincipalRules::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/, DEFAULT",
        )
        .unwrap();
        assert_eq!(
            rules
                .apply("CN=Kafka-Client,OU=ServiceUsers,O=Example")
                .as_deref(),
            Some("kafka-client")
        );
        assert_eq!(
            rules
                .apply("CN=adminUser,OU=Admin,O=Apache,L=SF,ST=CA,C=US")
                .as_deref(),
            Some("adminUser@Admin")
        );
        assert_eq!(rules.apply("CN=other").as_deref(), Some("CN=other"));
    }

    #[test]
    fn without_default_an_unmatched_subject_has_no_principal() {
        let rules = PrincipalRules::parse("RULE:^CN=([^,]*)(,.*)?$/$1/U").unwrap();
        assert_eq!(rules.apply("CN=bob,O=x").as_deref(), Some("BOB"));
        assert_eq!(rules.apply("O=x"), None);
        let escaped = PrincipalRules::parse(r"RULE:^CN=a\/b$/a-b/").unwrap();
        assert_eq!(escaped.apply("CN=a/b").as_deref(), Some("a-b"));
    }

    #[test]
    fn bad_rules_are_named_by_position() {
        let unclosed = PrincipalRules::parse("DEFAULT, RULE:^CN=(.*$/$1/").unwrap_err();
        assert!(
            unclosed.starts_with("rule 2: its pattern is not a regular expression"),
            "{unclosed}"
        );
        assert_eq!(
            PrincipalRules::parse("RULE:abc").unwrap_err(),
            "rule 1: has no / after its pattern"
        );
        assert_eq!(
            PrincipalRules::parse("DEFAULT x").unwrap_err(),
            "rule 1 is followed by text that is not a comma"
        );
        assert_eq!(
            PrincipalRules::parse("LOWER").unwrap_err(),
            "rule 1 is neither RULE:pattern/replacement/ nor DEFAULT"
        );
        assert!(PrincipalRules::parse(" ").is_err());
    }
}
