// Sphinx 9.0's Chinese search data ends with `window.Stemmer = ChineseStemmer`, a stemmer
// it never defines (its Chinese index stems the Latin words in English): say it is
// English's, until a Sphinx that defines it is the one installed.
if (typeof window.ChineseStemmer === "undefined") {
  window.ChineseStemmer = function () {
    return new EnglishStemmer();
  };
}
