//! The user name SASL EXTERNAL takes from a verified client certificate, as RabbitMQ's
//! `rabbitmq_auth_mechanism_ssl` does: the subject's common name by default, or the whole
//! subject, or the first subject alternative name of a kind (`amqp.ssl_cert_login_from`,
//! `amqp.ssl_cert_login_san_type`).

use crate::peer::CertificateNames;
use serde::Deserialize;

/// Where SASL EXTERNAL takes the user name from (`amqp.ssl_cert_login_from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CertLoginFrom {
    /// The subject's common name (CN).
    #[default]
    CommonName,
    /// The whole subject distinguished name, RFC 2253 (`CN=alice,O=Example`).
    DistinguishedName,
    /// The first subject alternative name of `amqp.ssl_cert_login_san_type`.
    SubjectAlternativeName,
}

/// A kind of subject alternative name (`amqp.ssl_cert_login_san_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SanType {
    /// A DNS name.
    #[default]
    Dns,
    /// An e-mail address.
    Email,
}

/// The login name in `names` that `from` (and `san` for SANs) selects, if there is one.
pub fn login_name(names: &CertificateNames, from: CertLoginFrom, san: SanType) -> Option<&str> {
    match from {
        CertLoginFrom::CommonName => names.common_name.as_deref(),
        CertLoginFrom::DistinguishedName => Some(names.subject.as_str()),
        CertLoginFrom::SubjectAlternativeName => match san {
            SanType::Dns => names.dns_names.first(),
            SanType::Email => names.emails.first(),
        }
        .map(String::as_str),
    }
    .filter(|name| !name.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> CertificateNames {
        CertificateNames {
            subject: "CN=alice,OU=eng,O=Example".into(),
            common_name: Some("alice".into()),
            dns_names: vec!["alice.example.com".into(), "a.example.com".into()],
            emails: vec!["alice@example.com".into()],
        }
    }

    #[test]
    fn each_configured_source_gives_its_name() {
        let n = names();
        let name = |from, san| login_name(&n, from, san);
        assert_eq!(name(CertLoginFrom::CommonName, SanType::Dns), Some("alice"));
        assert_eq!(
            name(CertLoginFrom::DistinguishedName, SanType::Dns),
            Some("CN=alice,OU=eng,O=Example")
        );
        assert_eq!(
            name(CertLoginFrom::SubjectAlternativeName, SanType::Dns),
            Some("alice.example.com")
        );
        assert_eq!(
            name(CertLoginFrom::SubjectAlternativeName, SanType::Email),
            Some("alice@example.com")
        );
    }

    #[test]
    fn a_certificate_without_the_name_gives_none() {
        let bare = CertificateNames {
            subject: "O=Example".into(),
            ..CertificateNames::default()
        };
        assert_eq!(
            login_name(&bare, CertLoginFrom::CommonName, SanType::Dns),
            None
        );
        assert_eq!(
            login_name(&bare, CertLoginFrom::SubjectAlternativeName, SanType::Email),
            None
        );
    }
}
