use ctxengine_core::tokens::{Encoding, TokenCounter};
fn main() {
    let text = std::fs::read_to_string("/tmp/text.txt").unwrap();
    let c = TokenCounter::OpenAi(Encoding::Cl100kBase);
    for _ in 0..3 {
        let t0 = std::time::Instant::now();
        let n = c.count(&text).unwrap();
        println!("count {n} total {:?}", t0.elapsed());
    }
}
