//! The atomic half of `ctxfold.text.entities.extract_mentions`: emails, URLs,
//! paths, numbers (versions, money, percentages, numeric dates, clock times),
//! date words, code identifiers and runs of capitalised words (people,
//! organisations, places, other names), each with its key.
//!
//! It gives exactly what the Python scanner (`ctxfold.text.entity_patterns`
//! plus the name runs of `entities.py`) gives, so positions are counted in
//! characters (Python `str` indices) and every character class follows
//! Python: `isalnum` is a letter or a number, `\w` adds `_`, `\s` adds the
//! separators `\x1c`-`\x1f`, `\d` is a decimal digit, and case-free matching
//! folds `K`, `ı`, `İ` and `ſ` as `re.IGNORECASE` does. The word lists come
//! from the caller (the Python package owns them).

use std::sync::OnceLock;

use regex::Regex;
use rustc_hash::FxHashSet;

use crate::error::{Error, Result};

/// What an atomic mention is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Email,
    Url,
    Path,
    Version,
    Money,
    Percent,
    Date,
    Time,
    Code,
    Person,
    Organisation,
    Location,
    Other,
}

impl Kind {
    /// The entity type's name in `ctxfold.text.entities.ENTITY_TYPES`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Email => "email",
            Kind::Url => "url",
            Kind::Path => "path",
            Kind::Version => "version",
            Kind::Money => "money",
            Kind::Percent => "percent",
            Kind::Date => "date",
            Kind::Time => "time",
            Kind::Code => "code",
            Kind::Person => "person",
            Kind::Organisation => "organisation",
            Kind::Location => "location",
            Kind::Other => "other",
        }
    }
}

/// One atomic mention: its text as written, span in characters, type, key
/// (the normalised form mentions of one entity share) and whether it is a
/// sentence's capitalised first word without a person cue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Atom {
    pub value: String,
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
    pub key: String,
    pub weak: bool,
}

/// The word lists the scanner reads, all lower-cased.
#[derive(Clone, Debug, Default)]
pub struct Lexicon {
    /// Place names (the gazetteer).
    pub places: Vec<String>,
    /// Words that are never an entity on their own.
    pub stop_words: Vec<String>,
    /// Chat spellings that are capitalised but name nothing ("im", "lol").
    pub not_names: Vec<String>,
    /// Titles before a name ("mr", "dr").
    pub titles: Vec<String>,
    /// Words that open a sentence before a name ("later", "maybe").
    pub openers: Vec<String>,
    /// Words that end an organisation's name ("inc", "university").
    pub org_words: Vec<String>,
    /// Words right before a name that make it a person ("friend", "told").
    pub person_cues: Vec<String>,
}

/// The scanner with its word lists as hash sets.
#[derive(Clone, Debug)]
pub struct EntityScanner {
    places: FxHashSet<String>,
    place_first_words: FxHashSet<String>,
    stop_words: FxHashSet<String>,
    not_names: FxHashSet<String>,
    titles: FxHashSet<String>,
    openers: FxHashSet<String>,
    org_words: FxHashSet<String>,
    person_cues: FxHashSet<String>,
}

const JOINERS: [&str; 6] = ["of", "de", "van", "von", "da", "del"];

fn set_of(words: &[String], argument: &str, one_word: bool) -> Result<FxHashSet<String>> {
    let mut out = FxHashSet::default();
    for word in words {
        if word.is_empty() || (one_word && word.chars().any(is_space)) {
            return Err(Error::invalid(argument, format!("{word:?} is not a word; pass non-empty lower-case words")));
        }
        out.insert(word.clone());
    }
    Ok(out)
}

impl EntityScanner {
    /// A scanner over `lexicon`; a word list entry that is empty or (except a
    /// place name) holds white space is an `InvalidInput` error.
    pub fn new(lexicon: &Lexicon) -> Result<Self> {
        let places = set_of(&lexicon.places, "places", false)?;
        let place_first_words =
            places.iter().filter_map(|p| p.split(is_space).find(|w| !w.is_empty()).map(str::to_string)).collect();
        Ok(Self {
            places,
            place_first_words,
            stop_words: set_of(&lexicon.stop_words, "stop_words", true)?,
            not_names: set_of(&lexicon.not_names, "not_names", true)?,
            titles: set_of(&lexicon.titles, "titles", true)?,
            openers: set_of(&lexicon.openers, "openers", true)?,
            org_words: set_of(&lexicon.org_words, "org_words", true)?,
            person_cues: set_of(&lexicon.person_cues, "person_cues", true)?,
        })
    }

    /// The atomic mentions of `text`: first the non-overlapping hits of every
    /// kind but names in order of their start, then the names in order.
    pub fn scan(&self, text: &str) -> Vec<Atom> {
        let scan = Text::new(text);
        let (hits, claimed) = scan.claim();
        let mut out = Vec::with_capacity(hits.len() * 2);
        for (start, end, kind) in hits {
            let value = scan.slice(start, end);
            let key = if kind == Kind::Code {
                let trimmed = value.trim_matches('`');
                normalise(trimmed.strip_suffix("()").unwrap_or(trimmed))
            } else {
                normalise(&value)
            };
            if !key.is_empty() {
                out.push(Atom { value, kind, start, end, key, weak: false });
            }
        }
        self.names(&scan, &claimed, &mut out);
        out
    }

    /// `scan` of each text.
    pub fn scan_many<S: AsRef<str>>(&self, texts: &[S]) -> Vec<Vec<Atom>> {
        texts.iter().map(|t| self.scan(t.as_ref())).collect()
    }

    fn bare_is_stop(&self, word: &str) -> bool {
        self.stop_words.contains(&bare(word))
    }

    fn names(&self, s: &Text, claimed: &[u8], out: &mut Vec<Atom>) {
        let t = &s.t;
        let mut resume = 0;
        for &start in &s.cand.capitals {
            if start < resume {
                continue;
            }
            let Some(end) = s.name_run(start) else { continue };
            resume = end;
            if (start > 0 && s.alnum(start - 1)) || claimed_any(claimed, start, end) {
                continue;
            }
            let run = &t[start..end];
            if run.iter().any(|&c| c == ' ' || c == '\t') {
                self.multi_word(s, start, end, out);
                continue;
            }
            let word: String = run.iter().collect();
            let low = word.to_lowercase();
            if self.bare_is_stop(&word) || self.not_names.contains(&low) {
                continue;
            }
            out.push(self.single_name(s, &word, start, &low));
        }
    }

    fn single_name(&self, s: &Text, word: &str, start: usize, low: &str) -> Atom {
        let end = start + word.chars().count();
        let key = if is_alnum_str(word) { low.to_string() } else { normalise(word) };
        let atom = |kind, key, weak| Atom { value: word.to_string(), kind, start, end, key, weak };
        if self.places.contains(&key) {
            return atom(Kind::Location, key, false);
        }
        if is_upper(word) {
            return atom(Kind::Other, key, false);
        }
        if self.person_before(s, start) || s.person_after(end) {
            return atom(Kind::Person, key, false);
        }
        let weak = s.at_sentence_start(start);
        atom(Kind::Other, key, weak)
    }

    /// The last word of the 24 characters before `start`, lower-cased without
    /// trailing dots, is a person cue.
    fn person_before(&self, s: &Text, start: usize) -> bool {
        let lo = start.saturating_sub(24);
        let hi = start.min(s.t.len());
        if lo >= hi {
            return false;
        }
        let window = &s.t[lo..hi];
        let Some(last) = window.iter().rposition(|&c| !is_space(c)) else { return false };
        let first = window[..last].iter().rposition(|&c| is_space(c)).map_or(0, |p| p + 1);
        let word: String = window[first..=last].iter().collect::<String>().to_lowercase();
        self.person_cues.contains(word.trim_end_matches('.'))
    }

    fn multi_word(&self, s: &Text, start: usize, end: usize, out: &mut Vec<Atom>) {
        let t = &s.t;
        // (word, start) of each run of non-space characters (the run holds only spaces and tabs as space).
        let mut words: Vec<(String, usize)> = Vec::new();
        let mut i = start;
        while i < end {
            if t[i] == ' ' || t[i] == '\t' {
                i += 1;
                continue;
            }
            let j = (i..end).find(|&k| t[k] == ' ' || t[k] == '\t').unwrap_or(end);
            words.push((t[i..j].iter().collect(), i));
            i = j;
        }
        let mut first = 0;
        while first < words.len() {
            let (w, at) = (&words[first].0, words[first].1);
            let low = w.to_lowercase();
            if self.bare_is_stop(w)
                || self.titles.contains(&low)
                || self.not_names.contains(&low)
                || (self.openers.contains(&low) && s.at_sentence_start(at))
            {
                first += 1;
            } else {
                break;
            }
        }
        let words = &words[first..];
        let word_end = |w: &(String, usize)| w.1 + w.0.chars().count();
        if words.len() > 1 {
            let last_low = words[words.len() - 1].0.to_lowercase();
            let first_low = words[0].0.to_lowercase();
            if self.org_words.contains(&last_low) || first_low == "university" || first_low == "college" {
                let a = words[0].1;
                let mut b = word_end(&words[words.len() - 1]);
                if b < t.len() && t[b] == '.' && self.org_words.contains(&format!("{last_low}.")) {
                    b += 1;
                }
                let value = s.slice(a, b);
                let key = normalise(&value);
                out.push(Atom { value, kind: Kind::Organisation, start: a, end: b, key, weak: false });
                return;
            }
        }
        let mut rest: Vec<&(String, usize)> = Vec::new();
        let mut i = 0;
        while i < words.len() {
            if !self.place_first_words.contains(&bare(&words[i].0)) {
                rest.push(&words[i]);
                i += 1;
                continue;
            }
            let mut matched = false;
            for k in (1..=4.min(words.len() - i)).rev() {
                let phrase = words[i..i + k].iter().map(|w| w.0.as_str()).collect::<Vec<_>>().join(" ");
                if self.places.contains(&normalise(&phrase)) {
                    self.flush(s, &mut rest, out);
                    let (a, b) = (words[i].1, word_end(&words[i + k - 1]));
                    let value = s.slice(a, b);
                    let key = normalise(&value);
                    out.push(Atom { value, kind: Kind::Location, start: a, end: b, key, weak: false });
                    i += k;
                    matched = true;
                    break;
                }
            }
            if !matched {
                rest.push(&words[i]);
                i += 1;
            }
        }
        self.flush(s, &mut rest, out);
    }

    fn flush(&self, s: &Text, rest: &mut Vec<&(String, usize)>, out: &mut Vec<Atom>) {
        let mut lo = 0;
        let mut hi = rest.len();
        while lo < hi && self.bare_is_stop(&rest[lo].0) {
            lo += 1;
        }
        while lo < hi && {
            let b = bare(&rest[hi - 1].0);
            self.stop_words.contains(&b) || JOINERS.contains(&b.as_str())
        } {
            hi -= 1;
        }
        if lo < hi {
            let a = rest[lo].1;
            let b = rest[hi - 1].1 + rest[hi - 1].0.chars().count();
            let value = s.slice(a, b);
            let starts = hi - lo == 1 && !is_upper(&value) && s.at_sentence_start(a);
            let kind = if is_upper(&value) {
                Kind::Other
            } else if self.person_before(s, a) || s.person_after(b) {
                Kind::Person
            } else {
                Kind::Other
            };
            let key = normalise(&value);
            out.push(Atom { value, kind, start: a, end: b, key, weak: starts && kind != Kind::Person });
        }
        rest.clear();
    }
}

fn claimed_any(claimed: &[u8], start: usize, end: usize) -> bool {
    let hi = end.min(claimed.len());
    start < hi && claimed[start..hi].contains(&1)
}

// ---- character classes as Python has them ----------------------------------------------

fn unicode_class(pattern: &'static str, cell: &'static OnceLock<Option<Regex>>, c: char) -> bool {
    let mut buf = [0u8; 4];
    cell.get_or_init(|| Regex::new(pattern).ok()).as_ref().is_some_and(|re| re.is_match(c.encode_utf8(&mut buf)))
}

/// `str.isalnum` of one character.
pub fn is_alnum(c: char) -> bool {
    static CLASS: OnceLock<Option<Regex>> = OnceLock::new();
    if c.is_ascii() {
        c.is_ascii_alphanumeric()
    } else {
        unicode_class(r"^[\p{L}\p{N}]$", &CLASS, c)
    }
}

/// `str.isdecimal` of one character (what `\d` matches).
pub fn is_decimal(c: char) -> bool {
    static CLASS: OnceLock<Option<Regex>> = OnceLock::new();
    if c.is_ascii() {
        c.is_ascii_digit()
    } else {
        unicode_class(r"^\p{Nd}$", &CLASS, c)
    }
}

/// `str.isspace` of one character (what `\s` matches).
pub fn is_space(c: char) -> bool {
    matches!(c, '\t'..='\r' | '\x1c'..='\x1f' | ' ' | '\u{85}' | '\u{a0}' | '\u{1680}' | '\u{2000}'..='\u{200a}'
        | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}')
}

fn is_alnum_str(s: &str) -> bool {
    !s.is_empty() && s.chars().all(is_alnum)
}

/// `str.isupper`: some cased character, none lower case.
fn is_upper(s: &str) -> bool {
    s.chars().any(char::is_uppercase) && !s.chars().any(char::is_lowercase)
}

/// `c` matches the lower-case ASCII letter `p` under `re.IGNORECASE`.
fn ieq(c: char, p: u8) -> bool {
    if c.is_ascii() {
        return c.to_ascii_lowercase() as u32 == u32::from(p);
    }
    matches!((p, c), (b'k', '\u{212a}') | (b'i', '\u{130}' | '\u{131}') | (b's', '\u{17f}'))
}

/// A word lower-cased without its contraction or possessive ("Don't" -> "don").
fn bare(word: &str) -> String {
    let low = word.to_lowercase();
    if low.contains(['\'', '’']) {
        let low = low.replace('’', "'");
        return low.split('\'').next().unwrap_or("").to_string();
    }
    low
}

const KEY_PREFIXES: [&str; 8] = ["the", "mr", "mrs", "ms", "miss", "dr", "prof", "professor"];

/// `ctxfold.text.entities.normalise`: lower case, single spaces, no
/// possessive ending, no leading article or title or trailing punctuation.
pub fn normalise(text: &str) -> String {
    if is_alnum_str(text) {
        return text.to_lowercase();
    }
    let low = text.to_lowercase();
    let joined = low.split(is_space).filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ");
    let mut key: &str = joined
        .trim_start_matches(['"', '\'', '`', '(', '['])
        .trim_end_matches(['.', ',', ';', ':', '!', '?', '"', '\'', '`', ')', ']']);
    if key.contains(['\'', '’']) {
        for ending in ["'s", "’s", "'", "’"] {
            if let Some(cut) = key.strip_suffix(ending) {
                key = cut;
                break;
            }
        }
    }
    if key.is_empty() || key.starts_with(['t', 'm', 'd', 'p']) {
        for prefix in KEY_PREFIXES {
            let Some(rest) = key.strip_prefix(prefix) else { continue };
            let after_dot = rest.strip_prefix('.');
            let mut cut = None;
            for candidate in after_dot.into_iter().chain(std::iter::once(rest)) {
                let trimmed = candidate.trim_start_matches(is_space);
                if trimmed.len() < candidate.len() {
                    cut = Some(trimmed);
                    break;
                }
            }
            if let Some(cut) = cut {
                return cut.to_string();
            }
        }
    }
    key.to_string()
}

// ---- the text as Python sees it -------------------------------------------------------------

const ALNUM: u8 = 1;
const SPACE: u8 = 2;
const DIGIT: u8 = 4;
const CURRENCY: [char; 4] = ['$', '€', '£', '¥'];
type Hit = (usize, usize, Kind);

/// Where each pass can find something, collected in one walk over the text
/// so that each pass visits only its candidates.
#[derive(Default)]
struct Candidates {
    at_signs: Vec<usize>,
    slashes: Vec<usize>,
    dots: Vec<usize>,
    backticks: Vec<usize>,
    calls: Vec<usize>,
    underscores: Vec<usize>,
    camel_capitals: Vec<usize>,
    capitals: Vec<usize>,
    number_starts: Vec<usize>,
    url_heads: Vec<usize>,
}

struct Text {
    t: Vec<char>,
    flags: Vec<u8>,
    /// The text lower-cased as `str.lower` does (longer than the text when a character lowers to two).
    low: Vec<char>,
    cand: Candidates,
}

impl Text {
    fn new(text: &str) -> Self {
        let t: Vec<char> = text.chars().collect();
        let mut flags = Vec::with_capacity(t.len());
        let mut low = Vec::with_capacity(t.len());
        let mut cand = Candidates::default();
        let mut previous = ' ';
        for (i, &c) in t.iter().enumerate() {
            if c.is_ascii() {
                let f = if c.is_ascii_alphanumeric() { ALNUM } else { 0 }
                    | if c.is_ascii_digit() { DIGIT } else { 0 }
                    | if is_space(c) { SPACE } else { 0 };
                flags.push(f);
                low.push(c.to_ascii_lowercase());
                match c {
                    '@' => cand.at_signs.push(i),
                    '/' | '\\' => cand.slashes.push(i),
                    '.' => cand.dots.push(i),
                    '`' => cand.backticks.push(i),
                    ')' if previous == '(' => cand.calls.push(i - 1),
                    '_' => cand.underscores.push(i),
                    '$' | '0'..='9' => cand.number_starts.push(i),
                    'h' | 'w' => cand.url_heads.push(i),
                    'A'..='Z' => {
                        cand.capitals.push(i);
                        if previous.is_ascii_lowercase() {
                            cand.camel_capitals.push(i);
                        }
                    }
                    _ => {}
                }
            } else {
                let f = (if is_alnum(c) { ALNUM } else { 0 })
                    | (if is_space(c) { SPACE } else { 0 })
                    | (if is_decimal(c) { DIGIT } else { 0 });
                flags.push(f);
                low.extend(c.to_lowercase());
                if f & DIGIT != 0 || CURRENCY.contains(&c) {
                    cand.number_starts.push(i);
                }
            }
            previous = c;
        }
        Self { t, flags, low, cand }
    }

    fn slice(&self, start: usize, end: usize) -> String {
        let n = self.t.len();
        let (a, b) = (start.min(n), end.min(n));
        if a >= b {
            return String::new();
        }
        self.t[a..b].iter().collect()
    }

    fn at(&self, i: usize) -> Option<char> {
        self.t.get(i).copied()
    }
    fn is(&self, i: usize, c: char) -> bool {
        self.at(i) == Some(c)
    }
    fn flag(&self, i: usize, f: u8) -> bool {
        self.flags.get(i).is_some_and(|&x| x & f != 0)
    }
    fn alnum(&self, i: usize) -> bool {
        self.flag(i, ALNUM)
    }
    fn word(&self, i: usize) -> bool {
        self.is(i, '_') || self.alnum(i)
    }
    fn space(&self, i: usize) -> bool {
        self.flag(i, SPACE)
    }
    fn digit(&self, i: usize) -> bool {
        self.flag(i, DIGIT)
    }
    fn free_left(&self, start: usize) -> bool {
        start == 0 || !self.alnum(start - 1)
    }
    fn free_right(&self, end: usize) -> bool {
        end >= self.t.len() || !self.alnum(end)
    }

    /// End of the run of characters satisfying `f` from `i` (below `limit`).
    fn run_to(&self, i: usize, limit: usize, f: impl Fn(usize) -> bool) -> usize {
        let mut j = i;
        while j < limit && f(j) {
            j += 1;
        }
        j
    }
    fn run(&self, i: usize, f: impl Fn(usize) -> bool) -> usize {
        self.run_to(i, self.t.len(), f)
    }
    fn digits(&self, i: usize) -> usize {
        self.run(i, |k| self.digit(k)) - i
    }
    fn spaces_to(&self, i: usize, limit: usize) -> usize {
        self.run_to(i, limit, |k| self.space(k))
    }

    /// Where the characters satisfying `f` that end at `end` start, at most
    /// `limit` back; None when the character before `end` is not one.
    fn left_run(&self, end: usize, limit: usize, f: impl Fn(usize) -> bool) -> Option<usize> {
        let mut k = end;
        while k > 0 && f(k - 1) {
            k -= 1;
        }
        (k < end).then(|| k.max(end.saturating_sub(limit)))
    }

    /// The exact ASCII `word` at `i`, ending before `limit`: its end.
    fn lit_to(&self, i: usize, word: &str, limit: usize) -> Option<usize> {
        let end = i + word.len();
        (end <= limit.min(self.t.len()) && word.bytes().zip(&self.t[i..end]).all(|(b, &c)| c as u32 == u32::from(b)))
            .then_some(end)
    }
    fn lit(&self, i: usize, word: &str) -> Option<usize> {
        self.lit_to(i, word, self.t.len())
    }
    /// `word` (lower-case ASCII) at `i` under `re.IGNORECASE`, ending before `limit`.
    fn ilit_to(&self, i: usize, word: &str, limit: usize) -> Option<usize> {
        let end = i + word.len();
        (end <= limit.min(self.t.len()) && word.bytes().zip(&self.t[i..end]).all(|(b, &c)| ieq(c, b))).then_some(end)
    }
    fn ilit(&self, i: usize, word: &str) -> Option<usize> {
        self.ilit_to(i, word, self.t.len())
    }

    fn at_sentence_start(&self, start: usize) -> bool {
        let hi = start.min(self.t.len());
        let lo = start.saturating_sub(6).min(hi);
        let window = &self.t[lo..hi];
        match window.iter().rposition(|&c| c != ' ' && c != '\t') {
            None => true,
            Some(p) => matches!(window[p], '.' | '!' | '?' | ':' | '\n' | '"' | '“' | '(' | '*' | '#' | '>' | '-'),
        }
    }

    /// A verb of saying or a relation right after a name, within 24 characters.
    fn person_after(&self, end: usize) -> bool {
        const AFTER: [&str; 21] = [
            "said", "says", "told", "tells", "asked", "asks", "thinks", "thought", "wants", "wanted", "is my",
            "was my", "and I", "called", "texted", "emailed", "replied", "mentioned", "suggested", "and his", "and her",
        ];
        let limit = (end + 24).min(self.t.len());
        let mut starts = Vec::with_capacity(2);
        if let Some(p) = self.lit_to(end, "'s", limit).or_else(|| self.lit_to(end, "’s", limit)) {
            starts.push(p);
        }
        starts.push(end);
        starts.into_iter().any(|p| {
            let q = self.run_to(p, limit, |k| self.t[k] == ' ' || self.t[k] == '\t');
            q > p
                && AFTER.iter().any(|w| self.lit_to(q, w, limit).is_some_and(|e| e >= limit || !self.word(e)))
        })
    }

    // ---- the passes, in priority order ----

    fn claim(&self) -> (Vec<Hit>, Vec<u8>) {
        let mut ranked: Vec<(usize, usize, std::cmp::Reverse<usize>, &'static str, Kind)> = Vec::new();
        let mut passes: [Vec<Hit>; 6] = Default::default();
        self.emails(&mut passes[0]);
        self.urls(&mut passes[1]);
        self.paths(&mut passes[2]);
        self.numbers(&mut passes[3]);
        self.dates(&mut passes[4]);
        self.code(&mut passes[5]);
        for (rank, hits) in passes.iter().enumerate() {
            ranked.extend(hits.iter().map(|&(s, e, k)| (rank, s, std::cmp::Reverse(e), k.name(), k)));
        }
        ranked.sort_unstable();
        let mut claimed = vec![0u8; self.t.len() + 1];
        let mut out = Vec::new();
        for (_, start, std::cmp::Reverse(end), _, kind) in ranked {
            if end > start && !claimed_any(&claimed, start, end) {
                out.push((start, end, kind));
                // As `bytearray[start:end] = ones` does, growing past the end.
                let size = claimed.len();
                let (a, b) = (start.min(size), end.min(size).max(start.min(size)));
                claimed.splice(a..b, std::iter::repeat_n(1u8, end - start));
            }
        }
        out.sort_unstable_by(|x, y| (x.0, x.1, x.2.name()).cmp(&(y.0, y.1, y.2.name())));
        (out, claimed)
    }

    fn emails(&self, out: &mut Vec<Hit>) {
        let email_left = |k: usize| self.word(k) || matches!(self.t[k], '.' | '+' | '-');
        let host = |k: usize| self.word(k) || self.t[k] == '-';
        let mut next = 0;
        while let Some(&a) = self.cand.at_signs.get(next) {
            next += 1;
            let mut found_end = None;
            if let Some(left) = self.left_run(a, 64, email_left) {
                let j = self.run(left, email_left);
                if j > left && self.is(j, '@') {
                    let h = self.run(j + 1, host);
                    if h > j + 1 {
                        let mut e = h;
                        let mut groups = 0;
                        while self.is(e, '.') {
                            let r = self.run(e + 1, host);
                            if r == e + 1 {
                                break;
                            }
                            e = r;
                            groups += 1;
                        }
                        if groups > 0 {
                            found_end = Some(e);
                            if e > a {
                                out.push((left, e, Kind::Email));
                            }
                        }
                    }
                }
            }
            let from = (a + 1).max(found_end.unwrap_or(0));
            while self.cand.at_signs.get(next).is_some_and(|&k| k < from) {
                next += 1;
            }
        }
    }

    fn urls(&self, out: &mut Vec<Hit>) {
        let mut resume = 0;
        for &i in &self.cand.url_heads {
            if i < resume {
                continue;
            }
            let head = match self.t[i] {
                'h' => self.lit(i, "http://").or_else(|| self.lit(i, "https://")),
                _ => self.lit(i, "www."),
            };
            let Some(h) = head else { continue };
            let e = self.run(h, |k| !self.space(k) && !matches!(self.t[k], '<' | '>' | '(' | ')' | '"' | '\'' | '`'));
            if e == h {
                continue;
            }
            let mut cut = e;
            while cut > i && matches!(self.t[cut - 1], '.' | ',' | ';' | ':' | '!' | '?' | ')') {
                cut -= 1;
            }
            out.push((i, cut, Kind::Url));
            resume = e;
        }
    }

    fn paths(&self, out: &mut Vec<Hit>) {
        let mut seen_end: Option<usize> = None;
        let path_left = |k: usize| self.word(k) || matches!(self.t[k], '.' | '~' | ':' | '/' | '\\' | '-');
        let path_right = |k: usize| self.word(k) || matches!(self.t[k], '.' | '/' | '\\' | '-');
        for &slash in &self.cand.slashes {
            if seen_end.is_some_and(|e| slash < e) {
                continue;
            }
            let start = self.left_run(slash, 80, path_left).unwrap_or(slash);
            let end = self.run(slash + 1, path_right);
            seen_end = Some(end);
            if let Some(e) = self.path_match(start, end) {
                let mut cut = e;
                while cut > start && self.t[cut - 1] == '.' {
                    cut -= 1;
                }
                if cut > start {
                    out.push((start, cut, Kind::Path));
                }
            }
        }
        const EXTENSIONS: [&str; 31] = [
            "py", "rs", "js", "ts", "tsx", "jsx", "json", "yml", "yaml", "toml", "md", "txt", "csv", "html", "css",
            "go", "java", "cpp", "hpp", "sh", "sql", "log", "cfg", "ini", "xml", "ipynb", "pdf", "doc", "docx", "xls",
            "xlsx",
        ];
        let mut resume = 0;
        for &i in &self.cand.dots {
            if i < resume {
                continue;
            }
            let w = self.run(i + 1, |k| self.word(k));
            if w - i - 1 > 5 || !EXTENSIONS.iter().any(|x| self.lit_to(i + 1, x, w) == Some(w)) {
                continue;
            }
            if seen_end.is_none_or(|e| i >= e) {
                if let Some(left) = self.left_run(i, 60, |k| self.word(k) || self.t[k] == '-') {
                    out.push((left, w, Kind::Path));
                }
            }
            resume = w;
        }
    }

    /// `_PATH.match(text, start, limit)`: the end of the match.
    fn path_match(&self, start: usize, limit: usize) -> Option<usize> {
        let x = |k: usize| k < limit && (self.word(k) || matches!(self.t[k], '.' | '-'));
        let letter = |a: usize, b: usize| (a..b).any(|k| self.t[k].is_ascii_alphabetic());
        // Segments: runs of `x` each followed by a separator, then the last run (maybe empty).
        let chain = |from: usize, backslash: bool| {
            let mut segs = Vec::new();
            let mut i = from;
            loop {
                let j = self.run_to(i, limit, x);
                if j > i && j < limit && (self.t[j] == '/' || (backslash && self.t[j] == '\\')) {
                    segs.push((i, j));
                    i = j + 1;
                } else {
                    segs.push((i, j));
                    return segs;
                }
            }
        };
        let at = |k: usize| if k < limit { self.at(k) } else { None };
        let prefix = match at(start) {
            Some(c) if c.is_ascii_alphabetic() && at(start + 1) == Some(':') && at(start + 2) == Some('\\') => {
                Some(start + 3)
            }
            Some('~') if at(start + 1) == Some('/') => Some(start + 2),
            Some('.') if at(start + 1) == Some('.') && at(start + 2) == Some('/') => Some(start + 3),
            Some('.') if at(start + 1) == Some('/') => Some(start + 2),
            Some('/') => Some(start + 1),
            _ => None,
        };
        if let Some(p) = prefix {
            let segs = chain(p, true);
            if let Some(&(_, e)) = segs.iter().rev().find(|&&(a, b)| letter(a, b)) {
                return Some(e);
            }
        }
        let segs = chain(start, false);
        let groups = segs.len() - 1;
        for k in (2..=groups).rev() {
            let (a, b) = segs[k];
            if letter(a, b) {
                return Some(b);
            }
        }
        for k in (1..=groups).rev() {
            let a = segs[k].0;
            let r = self.run_to(a, limit, |q| self.word(q) || self.t[q] == '-');
            if r > a && at(r) == Some('.') && at(r + 1).is_some_and(|c| c.is_ascii_alphabetic()) {
                let w = self.run_to(r + 2, limit, |q| self.word(q)).min(r + 2 + 5);
                return Some(w);
            }
        }
        None
    }

    fn numbers(&self, out: &mut Vec<Hit>) {
        let tail = |k: usize| self.digit(k) || matches!(self.t[k], '.' | ',' | ':' | '/' | '%' | '-');
        let mut pos = 0;
        let mut resume = 0;
        for &i in &self.cand.number_starts {
            if i < resume {
                continue;
            }
            let m_end = if CURRENCY.contains(&self.t[i]) && self.digit(i + 1) {
                self.run(i + 2, tail)
            } else if self.digit(i) {
                self.run(i + 1, tail)
            } else {
                continue;
            };
            let mut start = i;
            resume = m_end;
            if start < pos {
                continue;
            }
            if start > 0 && matches!(self.t[start - 1], 'v' | 'V') && self.free_left(start - 1) {
                start -= 1;
            } else if !self.free_left(start) && !CURRENCY.contains(&self.t[start - 1]) {
                continue;
            }
            let mut found = self.number_kind(start, true);
            if let Some((end, Kind::Version)) = found {
                let dots = self.t[start..end].iter().filter(|&&c| c == '.').count();
                let before: String = self.t[start.saturating_sub(8)..start].iter().flat_map(|c| c.to_lowercase()).collect();
                if !self.free_right(end) || (self.t[start] != 'v' && before != "version " && dots < 2) {
                    found = self.number_kind(start, false);
                }
            }
            if let Some((end, kind)) = found {
                out.push((start, end, kind));
                pos = end;
            }
        }
    }

    fn number_kind(&self, i: usize, version: bool) -> Option<(usize, Kind)> {
        if version {
            if let Some(e) = self.version(i) {
                return Some((e, Kind::Version));
            }
        }
        self.money(i)
            .map(|e| (e, Kind::Money))
            .or_else(|| self.percent(i).map(|e| (e, Kind::Percent)))
            .or_else(|| self.numeric_date(i).map(|e| (e, Kind::Date)))
            .or_else(|| self.time(i).map(|e| (e, Kind::Time)))
    }

    /// `\.\d+` at `j`, else `j`.
    fn fraction(&self, j: usize) -> usize {
        if self.is(j, '.') && self.digit(j + 1) {
            j + 1 + self.digits(j + 1)
        } else {
            j
        }
    }

    fn version(&self, i: usize) -> Option<usize> {
        if self.is(i, 'v') && self.digit(i + 1) {
            let mut j = i + 1 + self.digits(i + 1);
            while self.is(j, '.') && self.digit(j + 1) {
                j = j + 1 + self.digits(j + 1);
            }
            return Some(j);
        }
        let mut j = i;
        for part in 0..3 {
            let d = self.digits(j);
            if d == 0 {
                return None;
            }
            j += d;
            if part < 2 {
                if !self.is(j, '.') {
                    return None;
                }
                j += 1;
            }
        }
        if matches!(self.at(j), Some('-' | '+')) {
            let r = self.run(j + 1, |k| self.word(k) || self.t[k] == '.');
            if r > j + 1 {
                return Some(r);
            }
        }
        Some(j)
    }

    /// An optional space (tried with it first) then one of `words` (case-free) and a word boundary.
    fn spaced_word(&self, j: usize, words: &[&str]) -> Option<usize> {
        let options = [self.space(j).then_some(j + 1), Some(j)];
        options.into_iter().flatten().find_map(|p| {
            words.iter().find_map(|w| self.ilit(p, w).filter(|&e| !self.word(e)))
        })
    }

    fn money(&self, i: usize) -> Option<usize> {
        let amount = |j: usize| {
            let j = self.run(j + 1, |k| self.digit(k) || self.t[k] == ',');
            self.fraction(j)
        };
        if self.at(i).is_some_and(|c| CURRENCY.contains(&c)) {
            let mut j = i + 1;
            if self.space(j) && self.digit(j + 1) {
                j += 1;
            }
            if !self.digit(j) {
                return None;
            }
            let j = amount(j);
            return Some(self.spaced_word(j, &["k", "m", "bn", "million", "billion", "thousand"]).unwrap_or(j));
        }
        if !self.digit(i) {
            return None;
        }
        let j = amount(i);
        self.spaced_word(j, &["dollars", "usd", "eur", "euros", "gbp", "pounds", "bucks"])
    }

    fn percent(&self, i: usize) -> Option<usize> {
        let d = self.digits(i);
        if d == 0 {
            return None;
        }
        let j = self.fraction(i + d);
        let options = [self.space(j).then_some(j + 1), Some(j)];
        options.into_iter().flatten().find_map(|p| {
            if self.is(p, '%') {
                Some(p + 1)
            } else {
                self.ilit(p, "percent").filter(|&e| !self.word(e))
            }
        })
    }

    /// `\d{1,2}` then `sep` at `i`: the position after `sep`.
    fn one_or_two_then(&self, i: usize, sep: char) -> Option<usize> {
        [2usize, 1].into_iter().find_map(|d| {
            ((0..d).all(|k| self.digit(i + k)) && self.is(i + d, sep)).then_some(i + d + 1)
        })
    }

    fn numeric_date(&self, i: usize) -> Option<usize> {
        let iso = [4usize, 2, 2];
        let mut j = i;
        let mut ok = true;
        for (part, &d) in iso.iter().enumerate() {
            if !(0..d).all(|k| self.digit(j + k)) {
                ok = false;
                break;
            }
            j += d;
            if part < 2 {
                if !self.is(j, '-') {
                    ok = false;
                    break;
                }
                j += 1;
            }
        }
        if ok {
            return Some(j);
        }
        let j = self.one_or_two_then(i, '/')?;
        let j = self.one_or_two_then(j, '/')?;
        let d = self.digits(j).min(4);
        (d >= 2).then_some(j + d)
    }

    /// `[ap]m\b` or `[ap]\.m\.`, case-free, at `p`.
    fn meridiem(&self, p: usize) -> Option<usize> {
        let c = self.at(p)?;
        if !(ieq(c, b'a') || ieq(c, b'p')) || !self.at(p + 1).is_some_and(|m| ieq(m, b'm') || m == '.') {
            return None;
        }
        if self.at(p + 1).is_some_and(|m| ieq(m, b'm')) && !self.word(p + 2) {
            return Some(p + 2);
        }
        (self.is(p + 1, '.') && self.at(p + 2).is_some_and(|m| ieq(m, b'm')) && self.is(p + 3, '.')).then_some(p + 4)
    }

    fn spaced_meridiem(&self, j: usize) -> Option<usize> {
        [self.space(j).then_some(j + 1), Some(j)].into_iter().flatten().find_map(|p| self.meridiem(p))
    }

    fn time(&self, i: usize) -> Option<usize> {
        if let Some(mut j) = self.one_or_two_then(i, ':') {
            if self.digit(j) && self.digit(j + 1) {
                j += 2;
                if self.is(j, ':') && self.digit(j + 1) && self.digit(j + 2) {
                    j += 3;
                }
                return Some(self.spaced_meridiem(j).unwrap_or(j));
            }
        }
        [2usize, 1].into_iter().find_map(|d| {
            if (0..d).all(|k| self.digit(i + k)) {
                self.spaced_meridiem(i + d)
            } else {
                None
            }
        })
    }

    fn dates(&self, out: &mut Vec<Hit>) {
        const STEMS: [(&str, &[&str]); 14] = [
            ("day", &["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "today", "yesterday"]),
            ("tomorrow", &["tomorrow"]),
            ("jan", &["january", "jan"]),
            ("feb", &["february", "feb"]),
            ("mar", &["march", "mar"]),
            ("apr", &["april", "apr"]),
            ("may", &["may"]),
            ("jun", &["june", "jun"]),
            ("jul", &["july", "jul"]),
            ("aug", &["august", "aug"]),
            ("sep", &["september", "sept", "sep"]),
            ("oct", &["october", "oct"]),
            ("nov", &["november", "nov"]),
            ("dec", &["december", "dec"]),
        ];
        const CAPITAL_MONTHS: [&str; 11] = [
            "January", "February", "March", "April", "June", "July", "August", "September", "October", "November",
            "December",
        ];
        // Lower-casing can lengthen the text ("İ"); positions found in it are used on the text as they are.
        let low = &self.low;
        let size = low.len();
        let low_at = |i: usize, w: &str| i + w.len() <= size && w.chars().zip(&low[i..]).all(|(a, &b)| a == b);
        let mut clock_from = 0;
        for at in 0..size {
            // The stems that can start here (one walk instead of one per stem; the order of the hits is irrelevant).
            let stems: &[usize] = match low[at] {
                'd' => &[0, 13],
                't' => &[1],
                'j' => &[2, 7, 8],
                'f' => &[3],
                'm' => &[4, 6],
                'a' => &[5, 9],
                's' => &[10],
                'o' => &[11],
                'n' => &[12],
                _ => &[],
            };
            for &k in stems {
                let (stem, words) = STEMS[k];
                if !low_at(at, stem) {
                    continue;
                }
                for &word in words {
                    let Some(start) = (if stem == "day" { (at + 3).checked_sub(word.len()) } else { Some(at) }) else {
                        continue;
                    };
                    let end = start + word.len();
                    if low_at(start, word)
                        && (start == 0 || !is_alnum(low[start - 1]))
                        && (end == size || !(is_alnum(low[end]) || low[end] == '_'))
                    {
                        self.date_word(start, word, out, &CAPITAL_MONTHS);
                        break;
                    }
                }
            }
            // noon and midnight, as `finditer` finds them (no overlap).
            if at >= clock_from {
                let e = if low[at] == 'n' && low_at(at, "noon") {
                    at + 4
                } else if low[at] == 'm' && low_at(at, "midnight") {
                    at + 8
                } else {
                    continue;
                };
                if (at == 0 || !is_alnum(low[at - 1])) && (e >= size || !is_alnum(low[e])) {
                    out.push((at, e, Kind::Time));
                }
                clock_from = e;
            }
        }
    }

    fn date_word(&self, start: usize, name: &str, out: &mut Vec<Hit>, capital_months: &[&str]) {
        let end = start + name.len();
        let spaced = start > 0 && self.space(start - 1);
        let mut before = if spaced { self.day_before_month(start.saturating_sub(12), start) } else { None };
        if let (Some(b), "may") = (before, name) {
            let hi = start.min(self.t.len());
            let ordinal = (b..hi).any(|k| ["st", "nd", "rd", "th", "of"].iter().any(|w| self.ilit_to(k, w, hi).is_some()));
            if !ordinal {
                before = None;
            }
        }
        let from = before.unwrap_or(start);
        match self.month_at(from) {
            Some(e) if before.is_some() || e > end => out.push((from, e, Kind::Date)),
            _ if name.ends_with("day") || name.ends_with("morrow") => {
                let rel = if spaced { self.relative_before(start.saturating_sub(8), start) } else { None };
                out.push((rel.unwrap_or(start), end, Kind::Date));
            }
            _ => {
                if capital_months.contains(&self.slice(start, end).as_str()) {
                    out.push((start, end, Kind::Date));
                }
            }
        }
    }

    /// `\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?\Z` searched in `[lo, hi)`: its start.
    fn day_before_month(&self, lo: usize, hi: usize) -> Option<usize> {
        let hi = hi.min(self.t.len());
        (lo..hi).find(|&s| {
            [2usize, 1].into_iter().any(|d| {
                if s + d > hi || !(0..d).all(|k| self.digit(s + k)) {
                    return false;
                }
                let p = s + d;
                let ordinal = ["st", "nd", "rd", "th"].iter().find_map(|w| self.ilit_to(p, w, hi));
                ordinal.into_iter().chain(std::iter::once(p)).any(|q| {
                    let r = self.spaces_to(q, hi);
                    if r == q {
                        return false;
                    }
                    let of = self.ilit_to(r, "of", hi).map(|o| (o, self.spaces_to(o, hi))).filter(|&(o, r2)| r2 > o);
                    of.is_some_and(|(_, r2)| r2 == hi) || r == hi
                })
            })
        })
    }

    /// `(?:next|this|last|coming)\s+\Z` searched in `[lo, hi)`: its start.
    fn relative_before(&self, lo: usize, hi: usize) -> Option<usize> {
        let hi = hi.min(self.t.len());
        (lo..hi).find(|&s| {
            ["next", "this", "last", "coming"].iter().any(|w| {
                self.ilit_to(s, w, hi).is_some_and(|e| {
                    let r = self.spaces_to(e, hi);
                    r > e && r == hi
                })
            })
        })
    }

    /// Ends of a month name (case-free) at `p`, in the order the regex tries them.
    fn months(&self, p: usize) -> Vec<usize> {
        const FULL: [&str; 12] = [
            "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
            "november", "december",
        ];
        const SHORT: [&str; 12] = ["jan", "feb", "mar", "apr", "jun", "jul", "aug", "sept", "sep", "oct", "nov", "dec"];
        let mut out = Vec::new();
        out.extend(FULL.iter().filter_map(|w| self.ilit(p, w)));
        for w in SHORT {
            if let Some(e) = self.ilit(p, w) {
                if self.is(e, '.') {
                    out.push(e + 1);
                }
                out.push(e);
            }
        }
        out
    }

    /// `(?:,?\s+\d{4})?` at `j`.
    fn year_after(&self, j: usize) -> usize {
        let options = [self.is(j, ',').then_some(j + 1), Some(j)];
        options
            .into_iter()
            .flatten()
            .find_map(|p| {
                let q = self.spaces_to(p, self.t.len());
                (q > p && (0..4).all(|k| self.digit(q + k))).then_some(q + 4)
            })
            .unwrap_or(j)
    }

    /// `_MONTH_AT.match(text, p)`: a month and day (either order, with an optional year), or a month and year.
    fn month_at(&self, p: usize) -> Option<usize> {
        let n = self.t.len();
        let months = self.months(p);
        for &m in &months {
            let q = self.spaces_to(m, n);
            if q > m && self.digit(q) {
                let mut j = q + self.digits(q).min(2);
                if let Some(e) = ["st", "nd", "rd", "th"].iter().find_map(|w| self.ilit(j, w)) {
                    j = e;
                }
                return Some(self.year_after(j));
            }
        }
        let d = self.digits(p);
        if d == 1 || d == 2 {
            let q0 = p + d;
            let ordinal = ["st", "nd", "rd", "th"].iter().find_map(|w| self.ilit(q0, w));
            for q in ordinal.into_iter().chain(std::iter::once(q0)) {
                let r = self.spaces_to(q, n);
                if r == q {
                    continue;
                }
                if let Some(o) = self.ilit(r, "of") {
                    let r2 = self.spaces_to(o, n);
                    if r2 > o {
                        if let Some(&m) = self.months(r2).first() {
                            return Some(self.year_after(m));
                        }
                    }
                }
                if let Some(&m) = self.months(r).first() {
                    return Some(self.year_after(m));
                }
            }
        }
        for &m in &months {
            let q = self.spaces_to(m, n);
            if q > m && (0..4).all(|k| self.digit(q + k)) && !self.word(q + 4) {
                return Some(q + 4);
            }
        }
        None
    }

    fn code(&self, out: &mut Vec<Hit>) {
        let n = self.t.len();
        let word_left = |k: usize| self.t[k].is_ascii_alphanumeric() || self.t[k] == '_';
        // `[^`\n]{1,60}` between backticks.
        let mut resume = 0;
        for &i in &self.cand.backticks {
            if i < resume {
                continue;
            }
            let r = self.run_to(i + 1, n.min(i + 62), |k| self.t[k] != '`' && self.t[k] != '\n');
            if r > i + 1 && r - i - 1 <= 60 && self.is(r, '`') {
                out.push((i, r + 1, Kind::Code));
                resume = r + 1;
            }
        }
        // Calls: a dotted name right before "()".
        for &i in &self.cand.calls {
            let lo = i.saturating_sub(60);
            let span = self.left_run(i, i - lo, |k| self.word(k) || self.t[k] == '.');
            if let Some(a) = span {
                if let Some(q) = (a.max(lo)..i).find(|&q| self.t[q].is_ascii_alphabetic() || self.t[q] == '_') {
                    out.push((q, i + 2, Kind::Code));
                }
            }
        }
        // snake_case words.
        for &u in &self.cand.underscores {
            let Some(stem) = self.left_run(u, 40, word_left) else { continue };
            if let Some(e) = self.snake_word(stem) {
                if self.free_left(stem) && self.free_right(e) && e > u + 1 {
                    out.push((stem, e, Kind::Code));
                }
            }
        }
        // camelCase words: a capital right after a lower-case ASCII letter.
        for &c in &self.cand.camel_capitals {
            let Some(stem) = self.left_run(c, 41, word_left) else { continue };
            if let Some(e) = self.camel_word(stem) {
                if self.free_left(stem) && self.free_right(e) && !self.surname(stem, e) {
                    out.push((stem, e, Kind::Code));
                }
            }
        }
    }

    fn lower_digit_run(&self, i: usize) -> usize {
        self.run(i, |k| self.t[k].is_ascii_lowercase() || self.t[k].is_ascii_digit())
    }

    /// `[a-z]+(?:_[a-z0-9]+)+` at `i`.
    fn snake_word(&self, i: usize) -> Option<usize> {
        let mut j = self.run(i, |k| self.t[k].is_ascii_lowercase());
        if j == i {
            return None;
        }
        let mut groups = 0;
        while self.is(j, '_') {
            let r = self.lower_digit_run(j + 1);
            if r == j + 1 {
                break;
            }
            j = r;
            groups += 1;
        }
        (groups > 0).then_some(j)
    }

    /// `[A-Za-z][a-z0-9]*(?:[A-Z][a-z0-9]+)+` at `i`.
    fn camel_word(&self, i: usize) -> Option<usize> {
        if !self.at(i).is_some_and(|c| c.is_ascii_alphabetic()) {
            return None;
        }
        let mut j = self.lower_digit_run(i + 1);
        let mut groups = 0;
        while self.at(j).is_some_and(|c| c.is_ascii_uppercase()) {
            let r = self.lower_digit_run(j + 1);
            if r == j + 1 {
                break;
            }
            j = r;
            groups += 1;
        }
        (groups > 0).then_some(j)
    }

    /// McGregor, MacDonald, DiCaprio, LeBron: names, not code.
    fn surname(&self, a: usize, b: usize) -> bool {
        ["Mc", "Mac", "Di", "De", "Le", "La", "Van", "O"].iter().any(|p| {
            let k = a + p.len();
            self.lit_to(a, p, b).is_some()
                && k + 1 < b
                && self.t[k].is_ascii_uppercase()
                && self.t[k + 1..b].iter().all(char::is_ascii_lowercase)
        })
    }

    // ---- runs of capitalised words ----

    fn name_lower(&self, k: usize) -> bool {
        self.t[k].is_ascii_lowercase() || ('\u{e0}'..='\u{ff}').contains(&self.t[k])
    }

    /// One capitalised word at `i` (`[A-Z]` then lower-case letters with an
    /// optional hyphenated or apostrophe part, or up to five capitals).
    fn name_word(&self, i: usize, plural: bool) -> Option<usize> {
        if !self.at(i).is_some_and(|c| c.is_ascii_uppercase()) {
            return None;
        }
        let j = self.run(i + 1, |k| self.name_lower(k));
        if j > i + 1 {
            if matches!(self.at(j), Some('-' | '\'' | '’')) {
                let r = self.run(j + 1, |k| self.t[k].is_ascii_alphabetic());
                if r > j + 1 {
                    return Some(r);
                }
            }
            return Some(j);
        }
        let caps = self.run(i + 1, |k| self.t[k].is_ascii_uppercase());
        if caps == i + 1 {
            return None;
        }
        let j = caps.min(i + 6);
        Some(if plural && self.is(j, 's') { j + 1 } else { j })
    }

    /// `NAME.match(text, i)`: a run of capitalised words joined by spaces or tabs (and "of", "de", ...).
    fn name_run(&self, i: usize) -> Option<usize> {
        let blank = |k: usize| self.t[k] == ' ' || self.t[k] == '\t';
        let mut end = self.name_word(i, true)?;
        loop {
            let p = self.run(end, blank);
            if p == end {
                return Some(end);
            }
            let joined = JOINERS_IN_ORDER.iter().find_map(|w| {
                let e = self.lit(p, w)?;
                let q = self.run(e, blank);
                if q == e {
                    return None;
                }
                self.name_word(q, false)
            });
            match joined.or_else(|| self.name_word(p, false)) {
                Some(e) => end = e,
                None => return Some(end),
            }
        }
    }
}

const JOINERS_IN_ORDER: [&str; 6] = ["de", "van", "von", "da", "del", "of"];

/// Every position of the lower-cased `text` where a relative date
/// reference can start (what `ctxfold.text.temporal.resolve_dates` tries),
/// in order: where "last", "next" or "this" occurs, and the starts of the
/// word holding a head word (day, week, month, year, night, tomorrow) and of
/// the four words before it. Positions are character indices.
pub fn date_reference_starts(text: &str) -> Vec<usize> {
    const HEADS: [&str; 6] = ["day", "week", "month", "year", "night", "tomorrow"];
    const OPENERS: [&str; 3] = ["last", "next", "this"];
    let t: Vec<char> = text.chars().collect();
    let at = |i: usize, w: &str| i + w.len() <= t.len() && w.chars().zip(&t[i..]).all(|(a, &b)| a == b);
    let word = |i: usize| t[i] == '_' || is_alnum(t[i]);
    let mut starts = Vec::new();
    for i in 0..t.len() {
        if !matches!(t[i], 'd' | 'w' | 'm' | 'y' | 'n' | 't' | 'l') {
            continue;
        }
        if OPENERS.iter().any(|w| at(i, w)) {
            starts.push(i);
        }
        if HEADS.iter().any(|w| at(i, w)) {
            // The word holding the head, then up to four words before it, each after white space.
            let mut k = i;
            while k > 0 && word(k - 1) {
                k -= 1;
            }
            starts.push(k);
            for _ in 0..4 {
                let mut s = k;
                while s > 0 && is_space(t[s - 1]) {
                    s -= 1;
                }
                let mut w = s;
                while w > 0 && word(w - 1) {
                    w -= 1;
                }
                if s == k || w == s {
                    break;
                }
                starts.push(w);
                k = w;
            }
        }
    }
    starts.sort_unstable();
    starts.dedup();
    starts
}

/// For each group of `(literal, back)` pairs, every position `back`
/// characters before an occurrence of one of its literals in `text` (where
/// that is not before the start), in order, once each: where a clause
/// pattern can start. Positions are character indices.
pub fn literal_starts(text: &str, groups: &[Vec<(String, usize)>]) -> Vec<Vec<usize>> {
    let t: Vec<char> = text.chars().collect();
    let literals: Vec<(usize, Vec<char>, usize)> = groups
        .iter()
        .enumerate()
        .flat_map(|(g, pairs)| pairs.iter().map(move |(lit, back)| (g, lit.chars().collect::<Vec<_>>(), *back)))
        .filter(|(_, lit, _)| !lit.is_empty())
        .collect();
    let firsts: FxHashSet<char> = literals.iter().map(|(_, lit, _)| lit[0]).collect();
    let mut out = vec![Vec::new(); groups.len()];
    for (i, c) in t.iter().enumerate() {
        if !firsts.contains(c) {
            continue;
        }
        for (g, lit, back) in &literals {
            if lit[0] == *c && i >= *back && t[i..].starts_with(lit) {
                out[*g].push(i - back);
            }
        }
    }
    for starts in &mut out {
        starts.sort_unstable();
        starts.dedup();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &str) -> Vec<String> {
        list.split_whitespace().map(str::to_string).collect()
    }

    fn scanner() -> EntityScanner {
        let lexicon = Lexicon {
            places: vec!["lisbon".into(), "new york".into(), "new york city".into(), "texas".into()],
            stop_words: words("i the a my we it this that and or so"),
            not_names: words("im lol ok"),
            titles: words("mr mrs dr"),
            openers: words("later maybe"),
            org_words: words("inc inc. corp university"),
            person_cues: words("friend told met mr dr"),
        };
        EntityScanner::new(&lexicon).unwrap_or_else(|e| unreachable!("{e}"))
    }

    /// (value, type) of each atomic mention, in order of their start.
    fn kinds(text: &str) -> Vec<(String, &'static str)> {
        let mut atoms = scanner().scan(text);
        atoms.sort_by_key(|a| a.start);
        atoms.into_iter().map(|a| (a.value, a.kind.name())).collect()
    }

    #[test]
    fn finds_each_kind() {
        let found = kinds(
            "Mail bob@example.com or see https://x.org/a. Paid $1,200 (15%) on May 5, 2023 at 3:30 pm; \
             src/app/main.py has count_tokens and parseJson.",
        );
        let want = [
            ("Mail", "other"),
            ("bob@example.com", "email"),
            ("https://x.org/a", "url"),
            ("Paid", "other"),
            ("$1,200", "money"),
            ("15%", "percent"),
            ("May 5, 2023", "date"),
            ("3:30 pm", "time"),
            ("src/app/main.py", "path"),
            ("count_tokens", "code"),
            ("parseJson", "code"),
        ];
        let want: Vec<(String, &str)> = want.iter().map(|&(v, k)| (v.to_string(), k)).collect();
        assert_eq!(found, want);
    }

    #[test]
    fn names_places_and_organisations() {
        let found = kinds("My friend Melanie flew to New York City with Acme Inc and the University of Texas.");
        assert!(found.contains(&("Melanie".into(), "person")), "{found:?}");
        assert!(found.contains(&("New York City".into(), "location")), "{found:?}");
        assert!(found.contains(&("Acme Inc".into(), "organisation")), "{found:?}");
        assert!(found.contains(&("University of Texas".into(), "organisation")), "{found:?}");
    }

    #[test]
    fn positions_count_characters() {
        let atoms = scanner().scan("héllo “Lisbon” then $5");
        let lisbon = atoms.iter().find(|a| a.value == "Lisbon").map(|a| (a.start, a.end, a.kind));
        assert_eq!(lisbon, Some((7, 13, Kind::Location)));
        let money = atoms.iter().find(|a| a.kind == Kind::Money).map(|a| (a.start, a.end));
        assert_eq!(money, Some((20, 22)));
    }

    #[test]
    fn weak_sentence_openers_and_versions() {
        let atoms = scanner().scan("Coffee was good. We moved to v2.1 and 1.26.4 today.");
        let coffee = atoms.iter().find(|a| a.value == "Coffee");
        assert!(coffee.is_some_and(|a| a.weak && a.kind == Kind::Other));
        let versions: Vec<&str> = atoms.iter().filter(|a| a.kind == Kind::Version).map(|a| a.value.as_str()).collect();
        assert_eq!(versions, ["v2.1", "1.26.4"]);
        assert!(atoms.iter().any(|a| a.value == "today" && a.kind == Kind::Date));
    }

    #[test]
    fn keys_are_normalised() {
        assert_eq!(normalise("The  Payment Service's"), "payment service");
        assert_eq!(normalise("Dr. Smith"), "smith");
        assert_eq!(normalise("Mrs Smith"), "smith");
        assert_eq!(normalise("Lisbon"), "lisbon");
        assert_eq!(normalise("“quoted”."), "“quoted”");
    }

    #[test]
    fn date_references_start_at_openers_and_words_before_heads() {
        let text = "we met, in a couple of days; last night. x_yesterday";
        let starts = date_reference_starts(text);
        // "in a couple of days": the head's word and four words before it; "last"; "night"; "x_yesterday".
        assert_eq!(starts, [8, 11, 13, 20, 23, 29, 34, 41]);
    }

    #[test]
    fn literal_starts_finds_every_occurrence_once() {
        let groups = vec![vec![("i ".to_string(), 0), ("goal".to_string(), 3)], vec![("aa".to_string(), 0)]];
        assert_eq!(literal_starts("hi my goal: i aaa", &groups), [vec![1, 3, 12], vec![14, 15]]);
    }

    #[test]
    fn a_word_list_entry_with_spaces_is_refused() {
        let lexicon = Lexicon { stop_words: vec!["two words".into()], ..Lexicon::default() };
        assert!(matches!(EntityScanner::new(&lexicon), Err(Error::InvalidInput { .. })));
    }
}
