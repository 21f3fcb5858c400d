//! A `<scan dateFormatMark>`: the date in a file's name, as netCDF-Java's
//! `DateFromString.getDateUsingDemarkatedCount` reads it.
//!
//! The mark is `prefix#pattern`: the characters before `#` are only
//! counted (that many characters of the name are skipped, whatever they
//! are), and the rest is a `java.text.SimpleDateFormat` pattern applied to
//! as many characters of the name as the pattern has, in UTC. The name is
//! the file's own, without its directories. slabfs reads the numeric
//! fields netCDF-Java's archives use (`y`, `M`, `d`, `D` day of the year,
//! `H`, `m`, `s`; each as many digits as the letter is repeated) and any
//! other character as a literal that must be there; a field out of range
//! (month 13) is an error here, where Java's lenient parser would roll it
//! over. The date is shown as netCDF-Java shows it: ISO 8601,
//! `2006-06-07T12:00:00Z`.

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};

/// The date `mark` reads in the file name `name`, as ISO 8601 text.
pub fn date_of(name: &str, mark: &str) -> Result<String, String> {
    let (skip, pattern) = mark
        .split_once('#')
        .ok_or_else(|| format!("dateFormatMark {mark:?} has no '#'"))?;
    if pattern.contains('\'') {
        return Err(format!("dateFormatMark {mark:?}: quoted text is not read"));
    }
    let chars: Vec<char> = name.chars().collect();
    let skip = skip.chars().count();
    let want = pattern.chars().count();
    if chars.len() < skip + want {
        return Err(format!(
            "{name:?} is shorter than dateFormatMark {mark:?} reads"
        ));
    }
    let text: Vec<char> = chars[skip..skip + want].to_vec();
    let pat: Vec<char> = pattern.chars().collect();
    let (mut y, mut mo, mut d, mut doy, mut h, mut mi, mut s) = (None, None, None, None, 0, 0, 0);
    let mut i = 0;
    while i < pat.len() {
        let c = pat[i];
        let run = pat[i..].iter().take_while(|&&x| x == c).count();
        if c.is_ascii_alphabetic() {
            let digits: String = text[i..i + run].iter().collect();
            let v: u32 = digits.parse().map_err(|_| {
                format!(
                    "{name:?}: {digits:?} is not the number {} of dateFormatMark {mark:?} wants",
                    c.to_string().repeat(run)
                )
            })?;
            match c {
                'y' => y = Some(v as i32),
                'M' => mo = Some(v),
                'd' => d = Some(v),
                'D' => doy = Some(v),
                'H' => h = v,
                'm' => mi = v,
                's' => s = v,
                _ => {
                    return Err(format!(
                        "dateFormatMark {mark:?}: the field {c:?} is not read"
                    ));
                }
            }
        } else if text[i..i + run].iter().any(|&t| t != c) {
            return Err(format!(
                "{name:?} does not have {c:?} where dateFormatMark {mark:?} has it"
            ));
        }
        i += run;
    }
    let y = y.ok_or_else(|| format!("dateFormatMark {mark:?} has no year (y)"))?;
    let date = match (doy, mo, d) {
        (Some(doy), _, _) => NaiveDate::from_yo_opt(y, doy),
        (None, Some(mo), d) => NaiveDate::from_ymd_opt(y, mo, d.unwrap_or(1)),
        (None, None, _) => NaiveDate::from_ymd_opt(y, 1, 1),
    }
    .ok_or_else(|| format!("{name:?}: no such date (dateFormatMark {mark:?})"))?;
    let time = NaiveTime::from_hms_opt(h, mi, s)
        .ok_or_else(|| format!("{name:?}: no such time (dateFormatMark {mark:?})"))?;
    Ok(NaiveDateTime::new(date, time)
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netcdf_java_examples() {
        // AnnotatedSchema4's example and netCDF-Java's aggExistingOne.
        assert_eq!(
            date_of("CG2006158_120000h_usfc.nc", "CG#yyyyDDD_HHmmss").unwrap(),
            "2006-06-07T12:00:00Z"
        );
        // The prefix is counted, not matched.
        assert_eq!(
            date_of("XX2006158_120000h.nc", "CG#yyyyDDD_HHmmss").unwrap(),
            "2006-06-07T12:00:00Z"
        );
        assert_eq!(
            date_of("tas_20000131.nc", "tas_#yyyyMMdd").unwrap(),
            "2000-01-31T00:00:00Z"
        );
        assert_eq!(
            date_of("m_2000-02.nc", "m_#yyyy-MM").unwrap(),
            "2000-02-01T00:00:00Z"
        );
    }

    #[test]
    fn what_does_not_fit_is_an_error() {
        assert!(date_of("tas_20001301.nc", "tas_#yyyyMMdd").is_err());
        assert!(date_of("tas_2000.nc", "tas_#yyyyMMdd").is_err());
        assert!(date_of("tas_2000x01.nc", "tas_#yyyy-MM").is_err());
        assert!(date_of("tas_20000101.nc", "tas_yyyyMMdd").is_err());
        assert!(date_of("tas_20000101.nc", "#'x'yyyy").is_err());
        assert!(date_of("é_20000101.nc", "é_#yyyyMMdd").is_ok());
    }
}
