//! The names a verified client certificate carries, as [`ferry_auth::peer::CertificateNames`]:
//! the subject distinguished name printed as Kafka prints it (Java's RFC 2253 form: most
//! specific RDN first, `CN=alice,OU=eng,O=Example`), the common name, and the DNS and
//! e-mail subject alternative names.

use ferry_auth::peer::CertificateNames;
use std::fmt::Write;
use x509_parser::oid_registry::{
    OID_DOMAIN_COMPONENT, OID_USERID, OID_X509_COMMON_NAME, OID_X509_COUNTRY_NAME,
    OID_X509_LOCALITY_NAME, OID_X509_ORGANIZATION_NAME, OID_X509_ORGANIZATIONAL_UNIT,
    OID_X509_STATE_OR_PROVINCE_NAME, OID_X509_STREET_ADDRESS,
};
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
use x509_parser::x509::{AttributeTypeAndValue, X509Name};

/// The names of the DER certificate `der`; `None` when it does not parse (rustls verified
/// it already, so that does not happen for a client certificate).
pub(crate) fn of(der: &[u8]) -> Option<CertificateNames> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let subject = cert.subject();
    let common_name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .map(str::to_owned);
    let mut names = CertificateNames {
        subject: rfc2253(subject),
        common_name,
        dns_names: Vec::new(),
        emails: Vec::new(),
    };
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(dns) => names.dns_names.push((*dns).to_owned()),
                GeneralName::RFC822Name(email) => names.emails.push((*email).to_owned()),
                _ => {}
            }
        }
    }
    Some(names)
}

/// `name` as Java's `X500Principal.getName(RFC2253)` prints it, which is what Kafka's
/// principal mapping rules match: RDNs from the last (most specific) to the first, joined
/// by `,`; multi-valued RDNs joined by `+`; the keywords CN, C, L, ST, O, OU, STREET, DC and
/// UID, other attributes as their OID with the value as `#` and its DER in hex.
pub(crate) fn rfc2253(name: &X509Name<'_>) -> String {
    let rdns: Vec<String> = name
        .iter()
        .map(|rdn| rdn.iter().map(attribute).collect::<Vec<_>>().join("+"))
        .collect();
    rdns.into_iter().rev().collect::<Vec<_>>().join(",")
}

/// One `TYPE=value` of an RDN.
fn attribute(attr: &AttributeTypeAndValue<'_>) -> String {
    let oid = attr.attr_type();
    let keyword = [
        (&OID_X509_COMMON_NAME, "CN"),
        (&OID_X509_COUNTRY_NAME, "C"),
        (&OID_X509_LOCALITY_NAME, "L"),
        (&OID_X509_STATE_OR_PROVINCE_NAME, "ST"),
        (&OID_X509_ORGANIZATION_NAME, "O"),
        (&OID_X509_ORGANIZATIONAL_UNIT, "OU"),
        (&OID_X509_STREET_ADDRESS, "STREET"),
        (&OID_DOMAIN_COMPONENT, "DC"),
        (&OID_USERID, "UID"),
    ]
    .into_iter()
    .find(|(known, _)| *known == oid)
    .map(|(_, keyword)| keyword);
    match (keyword, attr.as_str()) {
        (Some(keyword), Ok(value)) => format!("{keyword}={}", escape(value)),
        (keyword, _) => {
            let kind = keyword.map_or_else(|| oid.to_id_string(), str::to_owned);
            format!("{kind}=#{}", der_hex(attr))
        }
    }
}

/// RFC 2253 §2.4 escaping of an attribute value.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The attribute value's DER encoding (tag, length, contents) in lower-case hex.
fn der_hex(attr: &AttributeTypeAndValue<'_>) -> String {
    let value = attr.attr_value();
    let data = value.data;
    let mut der = vec![u8::try_from(value.tag().0).unwrap_or(0)];
    match u8::try_from(data.len()) {
        Ok(n) if n < 0x80 => der.push(n),
        _ => {
            let len = data.len().to_be_bytes();
            let significant: Vec<u8> = len.iter().copied().skip_while(|b| *b == 0).collect();
            der.push(0x80 | u8::try_from(significant.len()).unwrap_or(0));
            der.extend(significant);
        }
    }
    der.extend_from_slice(data);
    der.iter().fold(String::new(), |mut hex, b| {
        let _ = write!(hex, "{b:02x}");
        hex
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};

    fn certificate(edit: impl FnOnce(&mut CertificateParams)) -> Vec<u8> {
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        edit(&mut params);
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn subject_is_printed_most_specific_first_as_kafka_does() {
        let der = certificate(|p| {
            p.distinguished_name.push(DnType::CountryName, "DE");
            p.distinguished_name
                .push(DnType::OrganizationName, "Example, Inc.");
            p.distinguished_name
                .push(DnType::OrganizationalUnitName, "eng");
            p.distinguished_name.push(DnType::CommonName, "alice");
        });
        let names = of(&der).unwrap();
        assert_eq!(names.subject, r"CN=alice,OU=eng,O=Example\, Inc.,C=DE");
        assert_eq!(names.common_name.as_deref(), Some("alice"));
    }

    #[test]
    fn dns_and_email_alternative_names_are_collected() {
        let der = certificate(|p| {
            p.distinguished_name.push(DnType::CommonName, "svc");
            p.subject_alt_names = vec![
                SanType::DnsName("svc.example.com".try_into().unwrap()),
                SanType::Rfc822Name("ops@example.com".try_into().unwrap()),
                SanType::IpAddress("127.0.0.1".parse().unwrap()),
            ];
        });
        let names = of(&der).unwrap();
        assert_eq!(names.dns_names, ["svc.example.com"]);
        assert_eq!(names.emails, ["ops@example.com"]);
    }

    #[test]
    fn a_subject_without_common_name_has_none() {
        let der = certificate(|p| {
            p.distinguished_name
                .push(DnType::OrganizationName, "Example");
        });
        let names = of(&der).unwrap();
        assert_eq!(names.subject, "O=Example");
        assert_eq!(names.common_name, None);
    }

    #[test]
    fn values_are_escaped_as_rfc_2253_says() {
        assert_eq!(escape("#a b "), r"\#a b\ ");
        assert_eq!(escape(" x"), r"\ x");
        assert_eq!(escape(r#"a+b;c<d>"e\"#), r#"a\+b\;c\<d\>\"e\\"#);
    }
}
