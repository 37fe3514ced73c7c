"""Natural-language inputs for the text objectives (whole-word MLM incl. Chinese WWM, NSP/SOP, TLM).

  codept.text.readers   files (txt/md/rst/man/jsonl/tsv/.mo/.po) -> TextDoc / PairDoc / Skip (codept.text.items),
                        by codept.text.prose (txt/md/rst), .man (groff), .records (jsonl/tsv/.mo/.po)
  codept.text.segment   char-level paragraphs, sentences (rule-based) and words (regex + jieba)
  codept.text.build     documents -> TextView / PairView aligned to a tokenizers.Tokenizer
  codept.text.view      the view dataclasses and their Arrow schema

Nothing is imported here, so ``import codept.text`` stays cheap (jieba loads on first Han text).
"""
