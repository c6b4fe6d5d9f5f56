"""Code for word_rules.yaml: each item asks for a word written under some rules, and is scored per rule."""


def split_rules(dataset):
    """process_docs: the rules as a list."""
    return dataset.map(lambda doc: {"rule_list": doc["rules"].split("+")})


def prompt(doc):
    return f"Write the word {doc['word']!r} following these rules: {', '.join(doc['rule_list'])}.\nAnswer:"


def trim(resps, docs):
    """A custom filter: each answer without surrounding spaces and quotes."""
    return [[r.strip().strip("'\"") for r in rs] for rs in resps]


def _expected(word, rules):
    out = word[::-1] if "reverse" in rules else word
    out = out.upper() if "upper" in rules else out
    return out + "!" if "exclaim" in rules else out


def _follows(rule, text, word):
    if rule == "upper":
        return text.isupper()
    if rule == "exclaim":
        return text.endswith("!")
    if rule == "reverse":
        return text.rstrip("!").lower() == word[::-1].lower()
    return False


def check(doc, results):
    """process_results: whether the answer follows every rule, and each rule on its own."""
    text = results[0]
    right_word = text.rstrip("!").lower() in (doc["word"].lower(), doc["word"][::-1].lower())
    per_rule = [right_word and _follows(rule, text, doc["word"]) for rule in doc["rule_list"]]
    return {"all_rules_followed": all(per_rule), "rule_followed": per_rule}


def mean_over_rules(items):
    """Aggregation: the share of all rules followed, over every item's rules."""
    flat = [x for per_item in items for x in per_item]
    return sum(flat) / len(flat) if flat else 0.0
