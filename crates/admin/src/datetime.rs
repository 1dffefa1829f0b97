//! `--to-datetime` values, as `kafka-consumer-groups` takes them: `2024-05-01T12:00:00.000`
//! with an optional zone (`Z`, `+02:00`, `-0530`); seconds and milliseconds may be left
//! out. A time without a zone is UTC (Kafka's tool takes the local zone; a daemon's
//! operator and its host often disagree on that, so Ferry's command asks for none).

/// Milliseconds since the Unix epoch of the date and time `text`.
///
/// # Errors
/// A sentence saying what format is expected.
pub(crate) fn parse_ms(text: &str) -> Result<i64, String> {
    let wrong = || {
        format!(
            "'{text}' is not a date and time like 2024-05-01T12:00:00.000 (UTC), optionally followed by Z or +HH:MM"
        )
    };
    let (date, rest) = text.split_once('T').ok_or_else(wrong)?;
    let (clock, offset_minutes) = split_zone(rest).ok_or_else(wrong)?;
    let numbers = |s: &str, sep: char| -> Option<Vec<i64>> {
        s.split(sep).map(|p| p.parse::<i64>().ok()).collect()
    };
    let [year, month, day] = numbers(date, '-').ok_or_else(wrong)?[..] else {
        return Err(wrong());
    };
    let (clock, millis) = match clock.split_once('.') {
        Some((c, ms)) if (1..=3).contains(&ms.len()) => {
            let scale = 10_i64.pow(3 - u32::try_from(ms.len()).unwrap_or(3));
            (c, ms.parse::<i64>().map_err(|_| wrong())? * scale)
        }
        Some(_) => return Err(wrong()),
        None => (clock, 0),
    };
    let hms = numbers(clock, ':').ok_or_else(wrong)?;
    let (hour, minute, second) = match hms[..] {
        [h, m] => (h, m, 0),
        [h, m, s] => (h, m, s),
        _ => return Err(wrong()),
    };
    let valid = (1..=12).contains(&month)
        && (1..=days_in_month(year, month)).contains(&day)
        && (0..24).contains(&hour)
        && (0..60).contains(&minute)
        && (0..60).contains(&second);
    if !valid {
        return Err(wrong());
    }
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
        - offset_minutes * 60;
    Ok(seconds * 1000 + millis)
}

/// The clock part of `rest` and its zone's offset from UTC in minutes (0 for none and
/// `Z`).
fn split_zone(rest: &str) -> Option<(&str, i64)> {
    if let Some(clock) = rest.strip_suffix('Z') {
        return Some((clock, 0));
    }
    let Some(at) = rest.rfind(['+', '-']) else {
        return Some((rest, 0));
    };
    let (clock, zone) = rest.split_at(at);
    let sign = if zone.starts_with('-') { -1 } else { 1 };
    let digits: String = zone[1..].chars().filter(|c| *c != ':').collect();
    if digits.len() != 4 {
        return None;
    }
    let hours: i64 = digits[..2].parse().ok()?;
    let minutes: i64 = digits[2..].parse().ok()?;
    Some((clock, sign * (hours * 60 + minutes)))
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the civil date (proleptic Gregorian; H. Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_tool_datetimes_parse_as_utc_unless_zoned() {
        assert_eq!(parse_ms("1970-01-01T00:00:00.000").unwrap(), 0);
        assert_eq!(
            parse_ms("2024-02-29T12:30:15.250").unwrap(),
            1_709_209_815_250
        );
        assert_eq!(
            parse_ms("2024-02-29T12:30:15.25Z").unwrap(),
            1_709_209_815_250
        );
        assert_eq!(
            parse_ms("2024-02-29T14:30:15.250+02:00").unwrap(),
            1_709_209_815_250
        );
        assert_eq!(
            parse_ms("2024-02-29T07:00:15.250-0530").unwrap(),
            1_709_209_815_250
        );
        assert_eq!(parse_ms("2024-02-29T12:30").unwrap(), 1_709_209_800_000);
    }

    #[test]
    fn impossible_datetimes_are_refused() {
        for bad in [
            "2023-02-29T00:00",
            "2024-13-01T00:00",
            "2024-01-01",
            "yesterday",
            "2024-01-01T25:00",
        ] {
            assert!(parse_ms(bad).is_err(), "{bad}");
        }
    }
}
