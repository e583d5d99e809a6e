#include "tools/mkmodel/corpus.h"

#include <string>

namespace k3::tools {
namespace {

// Each part is its own literal (all well under 60 KB); embedded_corpus()
// joins them in this order.
// English: an essay with numbers, dates, URLs and contractions.
constexpr std::string_view kEnglishWeatherStation = R"K3(# The Weather Station at Harrow Point

The weather station at Harrow Point stands on a shelf of grey rock about forty metres above the sea. It was built in 1931, rebuilt in 1968 after a winter storm tore the roof away, and automated in 2004. Nobody lives there now, but somebody still climbs the path twice a month to clean the sensors, replace the batteries and write a few lines in the paper logbook that hangs on a nail by the door. The logbook isn't required by anyone. It's simply a habit that nobody has wanted to break.

I'm the person who climbs the path most often. I don't mind the walk. On a clear morning you can see the whole bay: the fishing boats leaving the harbour at five, the ferry crossing at seven, the long white line where the current meets the shallow water near the islands. On a bad morning you can't see your own boots, and the wind pushes so hard against your chest that you have to lean into it like a door that won't open.

The station measures the usual things. Air temperature, humidity, pressure, wind speed and direction, rainfall, and the height of the waves at a buoy two kilometres offshore. Every ten minutes it sends a short message over the radio link: a timestamp, a station number, and a row of numbers. A typical message looks like this: 2024-11-03T06:40:00Z HP-07 T=8.4 RH=91 P=1002.7 W=14.2/245 G=21.9 R=0.6 H=2.31. The server in the town receives about 144 of these messages a day, 1,008 a week, and roughly 52,560 a year, if the link doesn't fail. It does fail, of course. Last January it failed for nineteen hours, and the gap is still there in the graph like a missing tooth.

What I like about the logbook is that it records the things the sensors can't. "Gulls on the roof again, 14 of them." "Somebody left a red scarf on the railing." "Fog so thick the lamp looked like a coin at the bottom of a well." "Battery 3 swollen, replaced with spare, serial 0047-B." The sensors tell you that the pressure fell by 11.3 hectopascals in six hours. The logbook tells you that the keeper before me wrote WE'RE IN FOR IT NOW in capital letters and underlined it twice.

## Why the small details matter

People often ask why we keep a station like this running when satellites can see the whole coast at once. The honest answer is that a satellite sees the top of the weather and the station sees the bottom of it. A satellite can tell you where a cloud is; it can't tell you that the wind at the point has been gusting from the south-west at 80 kilometres per hour since midnight, that the rain gauge filled twice, or that the temperature dropped four degrees in fifteen minutes when the front arrived. Forecasters use both. They'd be worse at their jobs without either.

There's another reason, which is harder to explain. A long record is valuable in a way that a short one isn't. The station has ninety-three years of data, with gaps, and those years let you ask questions that no new instrument can answer. Were the winters of the 1950s windier than the winters of the 2010s? How often did the harbour freeze before 1970, and how often after? Is the spring arriving earlier? You can't answer those questions with a sensor you installed last Tuesday. You need the old numbers, and you need somebody who knows what the old numbers meant: which thermometer was used, where it hung, whether it was in the shade.

## A note on units and formats

The older pages of the log use Fahrenheit, inches of mercury and miles per hour. The newer pages use Celsius, hectopascals and metres per second, except for one keeper in the 1990s who used knots because he'd been a sailor and refused to change. Converting them is tedious but not difficult: subtract 32 and multiply by 5/9; multiply inches of mercury by 33.8639; multiply knots by 0.514444 to get metres per second. The trouble is the dates. Some pages say 3/4/87, which could be the third of April or the fourth of March. Some say 4 Mar 87. Some say March 4th, 1987. One page, from a particularly tired night, just says "Tuesday?".

When we digitised the records in 2019, we agreed on ISO 8601 everywhere: 1987-03-04, 2019-07-22T14:05:00+01:00. We stored each reading as a line of comma-separated values and kept the original page number beside it, so that anyone who doubts a value can go back to the paper. The full archive is about 4.2 million rows. The compressed file is 61 MB; uncompressed it's 389 MB. It lives on a server in the town hall and on two backup drives, one of which is in my kitchen drawer next to the spare keys and a box of matches.

## Things that go wrong

Most failures are boring. A cable gets chewed by something. A solar panel gets covered in salt and stops charging. The clock drifts by a few seconds a week until somebody notices that the messages are arriving out of order. Once, a spider built a nest inside the rain gauge, and for three weeks the station reported no rain during the wettest October in a decade.

Some failures are more interesting. In 2016 the wind sensor started reporting a steady 0.0 m/s for hours at a time, then suddenly jumping to normal values. It turned out that a bolt had worked loose, and the whole mast was rocking slightly in the wind, so the cups of the anemometer were moving with the air instead of against it. The data looked calm; the reality was a storm. That's the kind of mistake you only catch if you know what the numbers should look like, and if you're willing to climb up and look.

I've learned to distrust any value that's too perfect. A temperature of exactly 10.0 degrees for six hours is not a calm day; it's a frozen sensor. A humidity of 100% for a week is not a week of fog; it's a wet probe. A pressure of 0 hPa is not the end of the world, although the first time I saw it I'll admit my heart stopped for a second.

## The people

There have been eleven keepers since 1931. The first was a retired schoolteacher called Agnes Moor, who wrote in a small, neat hand and never missed a reading in nine years. The second was her nephew, who missed quite a lot of readings and wrote mostly about fishing. After the war there was a couple who ran the station together and signed each entry with both initials, E.K. and J.K., sometimes with a small drawing of the weather: a sun, a cloud, three slanted lines for rain. In the 1970s a student from the university spent two summers there and left behind a stack of notes about cloud types that we still use for training.

I never met most of them, but I feel as if I know them from their handwriting. You can tell when somebody was cold, because the letters get shaky. You can tell when somebody was bored, because the margins fill up with doodles. You can tell when somebody was frightened, because the entries get shorter and shorter until they're just numbers.

## A morning in March

This morning the path was icy in the shadows and soft in the sun. I reached the station at 7:15, opened the door, and found that the logbook had fallen off its nail. Nothing else was wrong. The batteries showed 12.6 volts, the panels were clean, the last message had gone out at 07:10 on schedule. I checked the buoy reading on my phone: waves of 1.4 metres, period 9 seconds, water temperature 6.8 degrees.

I hung the book back up and wrote: "2025-03-14, 07:15. All normal. Book on floor, probably the wind. Heard a skylark on the way up, first of the year." Then I sat on the step for a few minutes with a thermos of tea and watched the ferry cross the bay, exactly on time, the way it has crossed every morning for as long as anyone can remember.

It's a small job. It doesn't change anything on its own. But every one of those numbers is a piece of the record, and the record is only as good as the people who keep adding to it. So I'll keep climbing the path, and when I can't, I hope somebody else will.

## Frequently asked questions

Q: Can I visit the station?
A: Yes, but you can't go inside. The path is open all year. Please don't touch the instruments, and don't leave anything on the railings; the wind takes it straight into the sea.

Q: Where can I download the data?
A: The live feed is at https://harrow-point.example.org/live and the archive is at https://data.example.org/stations/HP-07/archive?format=csv&from=1931-01-01&to=2024-12-31. For questions, write to records@harrow-point.example.org.

Q: WHY DOESN'T THE PAGE LOAD?
A: It's probably the radio link again. Try again in an hour. If it still doesn't work, it's likely that the server in the town hall has lost power, which happens about twice a year when the storms are bad. We've asked for a better connection since 2011. We're still asking.

Q: Isn't this all done by computers now?
A: The measuring is. The caring isn't.
)K3";

// English: engineering notes (upper-case contractions) and a short story.
constexpr std::string_view kEnglishEngineeringNotes = R"K3(
# Notes from a Small Engineering Team

We're five people. We build a service that answers questions about train timetables, and we've learned most of what we know by breaking it. These notes are for whoever joins next, so that they'll break different things than we did.

Rule one: read the error message before you search for it. Half of our incidents would've been shorter if the first person on call had read the last line of the log instead of the first. The first line says "request failed". The last line says "certificate expired on 2023-09-30 at 23:59:59 UTC". Only one of them tells you what to do.

Rule two: measure before you optimise. In March we spent two weeks making the parser 40% faster. Then somebody profiled the whole request and found that the parser took 0.3 ms out of 180 ms, and that 150 ms were spent waiting on a database query that didn't use its index. Adding the index took four minutes. We've kept the faster parser, but we don't talk about it.

Rule three: write down what you changed. "Fixed it" is not a commit message. "Raise the connection pool from 16 to 64; the nightly import opens 40 connections at once" is. When you're reading the history at three in the morning, you'll thank the person who wrote the second kind, even if that person was you.

Rule four: don't trust clocks. Servers disagree about the time by milliseconds, phones by seconds, and people by hours. Store timestamps in UTC, convert at the edge, and never compare two times that came from two different machines without asking how far apart their clocks might be.

Rule five: make the failure loud. A service that quietly returns an empty list when the database is down is worse than one that returns an error, because the empty list looks like an answer. We've had customers tell us that there were no trains to Lyon for a whole afternoon. There were trains. We just couldn't see them.

I'M NOT SAYING WE'VE GOT IT ALL FIGURED OUT. WE HAVEN'T. BUT WE'RE BETTER THAN WE WERE, AND THAT'S WHAT COUNTS. You'll find the rest in the wiki, which is out of date, and in the code, which isn't.

# A Very Short Story

The robot had been asked to sort the library, and it took the job seriously. It sorted the books by title, then by author, then by the colour of the spine, then by weight. It sorted them by the number of times the word "river" appeared, which turned out to be a surprisingly good way to find the adventure stories. It sorted them by the year they were printed and discovered that the library had a book from 1642 hiding between two cookbooks.

When the librarian came back on Monday, she found every book on the floor in one enormous spiral, arranged so that each was next to the one it was most similar to. "Where's the history section?" she asked. The robot pointed at a stretch of the spiral that curved past the windows. "And the poetry?" The robot pointed at several places at once.

She thought about it for a long time. Then she said, "It's beautiful, but nobody's going to find anything." The robot considered this, and put the books back on the shelves in the old order, alphabetical by author, fiction on the left and everything else on the right. But it kept the spiral in its memory, and sometimes, when a reader asked for something like a book they'd loved, it would quietly walk them to the right shelf.
)K3";

// German, French, Spanish, Italian and Portuguese.
constexpr std::string_view kEuropean = R"K3(
# Deutsch: Ein Tag am See

Am Samstag sind wir früh aufgestanden, weil das Wetter endlich schön werden sollte. Die Straße zum See war noch leer, und über den Wiesen lag ein dünner Nebel, der langsam in der Sonne verschwand. Meine Schwester hatte Brötchen, Käse und eine große Thermoskanne Kaffee eingepackt; ich hatte die Fahrräder geölt und die Reifen aufgepumpt.

Der See ist nicht besonders groß, ungefähr drei Kilometer lang und an der breitesten Stelle achthundert Meter breit. Im Sommer ist er voller Badegäste, aber im Mai ist das Wasser noch kalt, höchstens vierzehn Grad. Wir haben trotzdem die Füße hineingehalten und sofort wieder herausgezogen. Mein Großvater behauptet, dass er früher schon im April geschwommen ist. Ich glaube ihm kein Wort.

Gegen Mittag kamen die ersten Segelboote. Ein älterer Herr mit einem grünen Hut erklärte uns ausführlich, warum sein Boot das schnellste auf dem ganzen See sei, obwohl es offensichtlich das langsamste war. Wir haben höflich genickt. Später haben wir Eis gegessen, Schokolade und Zitrone, und sind über die Brücke zurück ins Dorf gefahren, wo gerade das Frühlingsfest begann. Es gab Blasmusik, Bratwürste und einen Stand, an dem man Größe und Gewicht eines Kürbisses schätzen sollte. Ich habe 23,5 Kilogramm geschätzt; es waren 31,2. Übung macht den Meister.

Zuhause haben wir festgestellt, dass wir beide einen Sonnenbrand hatten. Die Nase, die Ohren, der Nacken. Nächstes Mal nehmen wir Sonnencreme mit. Das sagen wir allerdings jedes Jahr.

# Français : La boulangerie de la rue des Lilas

Il y a une petite boulangerie au coin de la rue des Lilas, et c'est là que tout le quartier se retrouve le matin. Le boulanger s'appelle Étienne ; il commence à travailler à trois heures et demie, bien avant que le premier bus ne passe. À six heures, l'odeur du pain chaud arrive jusqu'à l'école, et les enfants qui attendent devant la grille font semblant de ne pas avoir faim.

Étienne n'aime pas beaucoup parler, mais il connaît les habitudes de chacun. La vieille dame du troisième étage prend une demi-baguette bien cuite et deux croissants. Le jeune médecin prend un pain aux céréales et un café qu'il boit debout, en trois gorgées. L'été, quand les touristes arrivent, ils demandent des choses qu'il n'a jamais vendues, et il répond toujours : « Ça, c'est à Paris. Ici, on fait du pain. »

L'hiver dernier, le four est tombé en panne un jeudi. Pendant deux jours, la rue a eu l'air d'un village abandonné. Les gens passaient, regardaient la vitrine vide et repartaient sans savoir où aller. Le samedi matin, quand la lumière s'est rallumée, il y avait une file d'attente jusqu'à la pharmacie. Personne ne s'est plaint. Quelqu'un avait même apporté des fleurs. Étienne a fait semblant de ne pas être ému, mais il a offert les pains au chocolat à tous les enfants, ce qu'il n'avait jamais fait auparavant et qu'il n'a jamais refait depuis.

Aujourd'hui, la boulangerie fête ses quarante ans. Sur la porte, une affiche dit simplement : « Merci à vous. Fermé le lundi, comme toujours. »

# Español: El mercado del sábado

¿Has estado alguna vez en el mercado del sábado en la plaza vieja? Si no, tienes que ir. Empieza a las ocho de la mañana, aunque los vendedores llegan mucho antes, cuando todavía es de noche, con camionetas llenas de cajas de tomates, naranjas, pimientos y lechugas. A las nueve ya no cabe ni un alfiler.

Mi puesto favorito es el de la señora Núñez, que vende quesos de cabra de su propia granja, a unos cuarenta kilómetros de aquí. Siempre te deja probar uno antes de comprar, y siempre te cuenta algo: que las cabras están nerviosas porque va a llover, que su nieto ha aprobado los exámenes, que el año pasado ganó un premio en la feria de la región. ¡Y es verdad! Tiene la medalla colgada detrás del mostrador.

Al lado hay un chico que vende miel y velas. Se llama Andrés, estudia biología y lleva las colmenas de su abuelo los fines de semana. Me explicó que una colmena puede producir entre quince y treinta kilos de miel al año, según el tiempo y las flores. La miel de romero es clara y suave; la de castaño es oscura y un poco amarga. Yo prefiero la de azahar, que huele a primavera.

Hacia el mediodía el mercado empieza a vaciarse. Los vendedores recogen, los niños persiguen a las palomas y los músicos de la esquina tocan la última canción. Siempre es la misma, una canción antigua que todo el mundo conoce y nadie recuerda entera. Pero todos cantan el estribillo, y luego cada uno vuelve a casa con las bolsas llenas y los pies cansados.

# Italiano e Português, brevemente

In Italia, la colazione è semplice: un cappuccino e un cornetto, in piedi al bancone del bar, in meno di cinque minuti. Il pranzo invece è sacro, e la cena può durare tre ore se gli amici sono quelli giusti. Perché avere fretta?

Em Portugal, as tardes de domingo são para o café com a família. A avó faz pão de ló, o avô conta histórias de quando era pescador, e as crianças correm pelo quintal até ao anoitecer. Não há pressa, não há relógio, só o cheiro do mar e o som das gaivotas.
)K3";

// Russian, Ukrainian and Greek.
constexpr std::string_view kCyrillicGreek = R"K3(
# Русский: Поезд на север

Поезд отходит от вокзала в половине десятого вечера. В купе нас четверо: пожилая женщина с корзиной яблок, студент с огромным рюкзаком, молчаливый мужчина в сером пальто и я. Сначала все молчат, смотрят в окно на огни города, которые постепенно становятся реже, а потом исчезают совсем.

Через час проводница приносит чай в стаканах с металлическими подстаканниками. Женщина достаёт яблоки и угощает всех. Студент рассказывает, что едет на практику, на метеостанцию у Белого моря, и что там он проведёт целых три месяца. «А интернет там есть?» — спрашивает женщина. «Говорят, иногда бывает», — отвечает он и смеётся.

Мужчина в сером пальто оказывается инженером. Он строил мосты по всей стране, от Калининграда до Владивостока, и помнит каждый из них по номеру. «Мост номер сорок семь, — говорит он, — через реку, которую никто не может правильно произнести. Длина двести двенадцать метров. Стоит до сих пор». Мы по очереди пытаемся произнести название реки, и у нас действительно ничего не получается.

Ночью поезд идёт медленно, останавливается на маленьких станциях, где под единственным фонарём стоит дежурный с флажком. Утром за окном уже снег, хотя в городе была осень. Берёзы, ели, замёрзшие озёра, и ни одного человека до самого горизонта. Студент прижимается лбом к стеклу и говорит тихо: «Вот это да». Больше ничего не нужно говорить.

# Українська, коротко

Добрий день! Сьогодні гарна погода, і ми підемо гуляти в парк. Там цвітуть каштани, а діти годують качок біля ставка.

# Ελληνικά: Το νησί

Το καλοκαίρι πηγαίναμε πάντα στο νησί της γιαγιάς. Το πλοίο έφευγε από τον Πειραιά νωρίς το πρωί και έφτανε το απόγευμα, μετά από οκτώ ώρες ταξίδι. Καθόμασταν στο κατάστρωμα, τρώγαμε τυρόπιτες και μετρούσαμε τα δελφίνια.

Το σπίτι της γιαγιάς ήταν άσπρο με μπλε παράθυρα, πάνω σε έναν λόφο πάνω από το λιμάνι. Κάθε πρωί μας ξυπνούσαν τα κοκόρια και η μυρωδιά του καφέ. Η γιαγιά έλεγε ότι η θάλασσα είναι πιο ζεστή τον Αύγουστο, αλλά εμείς κολυμπούσαμε από τον Ιούνιο μέχρι τον Σεπτέμβριο, ό,τι καιρό κι αν έκανε.

Τα βράδια όλο το χωριό μαζευόταν στην πλατεία. Οι μεγάλοι έπιναν ούζο και συζητούσαν για πολιτική, τα παιδιά έπαιζαν κρυφτό ανάμεσα στα τραπέζια, και κάποιος πάντα έπαιζε μπουζούκι. Θυμάμαι ακόμα τα αστέρια: τόσα πολλά, που ο ουρανός έμοιαζε άσπρος. Φέτος θα ξαναπάω, μετά από είκοσι χρόνια. Ελπίζω να μην έχει αλλάξει τίποτα.

Αριθμοί: ένα, δύο, τρία, τέσσερα, πέντε. Γράμματα: Α α, Β β, Γ γ, Δ δ, Ε ε, Ζ ζ, Η η, Θ θ, Ω ω. Η τιμή του π είναι περίπου 3,14159.
)K3";

// Chinese (simplified, traditional), Japanese (kanji, hiragana, katakana), Korean.
constexpr std::string_view kCjk = R"K3(
# 中文（简体）：城市里的小菜园

我家楼顶有一个小菜园，是我奶奶三年前开始种的。一开始只有两个花盆，种了一点葱和辣椒。后来邻居们看见了，也纷纷拿来自己的花盆和种子，现在楼顶上已经有四十多个盆了，种着西红柿、黄瓜、茄子、豆角、生菜，还有一棵小小的柠檬树。

每天早上六点，奶奶就上楼浇水。她说，菜和人一样，要按时吃饭，按时睡觉，才能长得好。夏天太阳大，她就用旧床单搭一个棚子；冬天冷，她就把怕冻的盆搬到楼梯间里。邻居们有空的时候也会帮忙，有人负责施肥，有人负责除草，有人专门负责拍照发到群里。

去年秋天，菜园大丰收。我们一共收了大约二十五公斤西红柿，十几公斤黄瓜，还有一大筐辣椒。奶奶把菜分给每一户人家，剩下的做成了辣椒酱和泡菜。楼里的小朋友们第一次知道，原来西红柿是长在藤上的，不是长在超市里的。

现在，楼顶菜园已经成了我们小区的一个聚会的地方。傍晚的时候，大家端着茶杯上来，看看菜，聊聊天，看着太阳慢慢落下去。奶奶常说：“种菜不难，难的是坚持。”我觉得她说的不只是种菜。

# 中文（繁體）：老街的茶館

老街盡頭有一家茶館，已經開了六十多年。門口掛著一塊舊木匾，上面的字已經看不太清楚了。茶館裡擺著十幾張方桌，牆上掛著泛黃的照片，角落裡有一臺老式收音機，每天下午都播放戲曲。

來這裡喝茶的大多是附近的老人。他們每天準時報到，點一壺鐵觀音或者普洱，一坐就是一下午。有人下象棋，有人看報紙，有人什麼都不做，只是靜靜地聽著收音機。老闆是一位七十歲的老先生，他記得每一位客人喜歡喝什麼茶，也記得每一位客人的孫子叫什麼名字。

最近幾年，年輕人也開始來了。他們帶著筆記型電腦，在這裡寫作業、畫畫、聊天。一開始老人們有點不習慣，後來也就慢慢接受了。有一位大學生甚至拜老先生為師，學習怎麼泡茶。老先生很高興，他說：「茶要慢慢泡，日子要慢慢過。」

# 日本語：駅前の本屋さん

駅前に小さな本屋さんがあります。店主の田中さんは、もう四十年もこの店を続けています。店の中は狭くて、天井まで本がぎっしり並んでいますが、田中さんはどの本がどこにあるか、全部覚えているそうです。

ある雨の日、私は傘を忘れて、雨宿りのためにその本屋さんに入りました。すると田中さんが「ゆっくりしていってください」と言って、温かいお茶を出してくれました。棚を眺めていると、子どものころに大好きだった絵本を見つけました。表紙は少し色あせていましたが、中の絵はあの頃のままでした。

「その本、懐かしいでしょう」と田中さんが笑いました。「毎年、何人かのお客さんが同じ本を見つけて、同じ顔をするんですよ」。私はその絵本を買って帰りました。値段は八百円でした。

最近はインターネットで何でも買えるようになりましたが、こういう本屋さんには、画面の中にはないものがあると思います。紙の匂い、店主との会話、偶然の出会い。カタカナで言えば「セレンディピティ」でしょうか。これからも、ずっと続いてほしいです。

ひらがな：あいうえお かきくけこ さしすせそ たちつてと なにぬねの。カタカナ：アイウエオ カキクケコ サシスセソ タチツテト ナニヌネノ。コーヒー、コンピューター、データベース、プログラミング。

# 한국어: 할머니의 김치

우리 할머니는 매년 겨울이 오기 전에 김장을 하십니다. 김장하는 날에는 온 가족이 할머니 댁에 모입니다. 삼촌, 이모, 사촌들까지 모두 스무 명이 넘습니다. 아침 일찍부터 배추를 소금에 절이고, 무를 썰고, 양념을 만듭니다.

양념에는 고춧가루, 마늘, 생강, 젓갈, 그리고 할머니만 아는 비밀 재료가 들어갑니다. 할머니는 그 재료가 무엇인지 절대로 말해 주지 않으십니다. 사촌 동생은 그것이 배라고 하고, 나는 사과라고 생각합니다. 아무도 정답을 모릅니다.

점심에는 갓 담근 김치와 수육을 먹습니다. 따뜻한 고기에 매콤한 김치를 싸서 먹으면 정말 맛있습니다. 오후가 되면 김치를 통에 담아서 각자 집으로 가져갑니다. 올해는 배추를 백 포기나 담갔습니다. 할머니는 힘드셨을 텐데도 웃으면서 "내년에도 다 같이 오너라"라고 말씀하셨습니다.
)K3";

// Arabic and Hebrew (right to left), Hindi and Thai, with native digits.
constexpr std::string_view kRtlIndicThai = R"K3(
# العربية: المكتبة القديمة

في وسط المدينة القديمة توجد مكتبة صغيرة، عمرها أكثر من مئة عام. جدرانها من الحجر، ونوافذها خشبية، ورفوفها مليئة بالكتب من الأرض حتى السقف. يأتي إليها الطلاب والباحثون وكبار السن، وكل واحد منهم يبحث عن شيء مختلف.

صاحب المكتبة رجل هادئ اسمه يوسف. ورث المكتبة عن أبيه، وأبوه ورثها عن جده. يقول يوسف إن الكتب مثل الأصدقاء: بعضها تقرؤه مرة واحدة وتنساه، وبعضها يرافقك طوال حياتك. وعندما يسأله أحد عن كتاب نادر، يبتسم ويقول: «انتظر قليلاً»، ثم يختفي بين الرفوف ويعود بعد دقائق ومعه الكتاب المطلوب.

في المساء، تتحول المكتبة إلى مكان للقاء. يجلس الناس على الكراسي القديمة، يشربون الشاي بالنعناع، ويتحدثون عن الشعر والتاريخ والعلوم. الأرقام العربية: ٠ ١ ٢ ٣ ٤ ٥ ٦ ٧ ٨ ٩، وفي السنة الماضية زار المكتبة ١٢٣٤٥ شخصاً.

# עברית: הגינה הקהילתית

בשכונה שלנו יש גינה קהילתית קטנה. לפני חמש שנים היה שם מגרש ריק מלא אבנים וקוצים. יום אחד כמה שכנים החליטו לנקות אותו ולשתול עצים. היום יש שם עצי זית, לימון ורימון, ערוגות של ירקות ותבלינים, וספסל מתחת לעץ תאנה גדול.

בכל יום שישי בבוקר נפגשים בגינה. מי שרוצה עוזר להשקות, לעשב ולקטוף. הילדים אוהבים במיוחד לחפש תולעים ולספור את הפרחים. אחר כך כולם יושבים יחד, שותים קפה ואוכלים עוגה שמישהו הביא מהבית. אין כאן מנהל ואין חוקים כתובים, אבל כולם יודעים מה צריך לעשות.

# हिन्दी: बारिश का पहला दिन

गर्मी के लंबे महीनों के बाद आज सुबह पहली बारिश हुई। आसमान में काले बादल छा गए, हवा ठंडी हो गई, और फिर अचानक मोटी-मोटी बूँदें गिरने लगीं। गली के सारे बच्चे घरों से बाहर निकल आए और बारिश में नाचने लगे।

मिट्टी की सोंधी खुशबू पूरे मोहल्ले में फैल गई। दादी ने कहा कि इस खुशबू के लिए वह पूरे साल इंतज़ार करती हैं। माँ ने गरम-गरम पकौड़े बनाए और पिताजी ने अदरक वाली चाय। हम सब बरामदे में बैठकर बारिश देखते रहे। सड़क पर पानी भर गया और बच्चों ने कागज़ की नावें तैराईं।

शाम तक बारिश रुक गई। आसमान साफ़ हो गया और पश्चिम में एक सुंदर इंद्रधनुष दिखाई दिया। अंक: ० १ २ ३ ४ ५ ६ ७ ८ ९। इस साल मानसून लगभग १५ दिन पहले आया है।

# ภาษาไทย: ตลาดน้ำ

เช้าวันอาทิตย์ เราตื่นแต่เช้าเพื่อไปเที่ยวตลาดน้ำ ที่ตลาดมีเรือเล็ก ๆ หลายสิบลำ แม่ค้าพายเรือขายผลไม้ ขนม และก๋วยเตี๋ยวร้อน ๆ ริมคลองมีบ้านไม้เก่าแก่ และต้นมะพร้าวสูงเรียงรายอยู่สองฝั่ง

ฉันซื้อมะม่วงสุกกับข้าวเหนียวมะม่วงจากคุณยายคนหนึ่ง คุณยายบอกว่าขายขนมอยู่ที่นี่มาสามสิบปีแล้ว ทุกวันต้องตื่นตั้งแต่ตีสี่เพื่อเตรียมของ แต่คุณยายยิ้มตลอดเวลาและบอกว่ามีความสุขที่ได้เห็นลูกค้ากินอร่อย

ตอนสาย ๆ นักท่องเที่ยวเริ่มเยอะขึ้น เราจึงนั่งเรือไปตามคลองเพื่อดูวิถีชีวิตของชาวบ้าน ตัวเลขไทย: ๐ ๑ ๒ ๓ ๔ ๕ ๖ ๗ ๘ ๙ ค่าเรือคนละ ๕๐ บาท
)K3";

// Emoji (ZWJ sequences, skin tones, flags, keycaps) and numbers of many lengths.
constexpr std::string_view kEmojiNumbers = R"K3(
# Emoji 🎉

Good morning! ☀️ The coffee is ready ☕ and the cat is asleep on the keyboard 🐈‍⬛⌨️. Weekend plans: 🚲 ride to the lake, 🏊 swim (too cold 🥶), 🍦 ice cream, 📚 read, 😴 sleep.

Family: 👨‍👩‍👧‍👦 👨‍👩‍👧 👩‍👩‍👦 👨‍👨‍👧‍👧. People at work: 👩‍💻 👨‍🔬 👩‍🚀 🧑‍🍳 👨‍🚒 🧑‍🏫 👩‍⚕️ 🧑‍🌾. Hands and skin tones: 👍 👍🏻 👍🏼 👍🏽 👍🏾 👍🏿 👋🏽 ✌🏿 🤝 🙏🏻 👏👏👏. Couples: 🧑‍🤝‍🧑 👩‍❤️‍👨 💑. Hearts: ❤️ 🧡 💛 💚 💙 💜 🖤 🤍 🤎 ❤️‍🔥 ❤️‍🩹.

Flags: 🇩🇪 🇫🇷 🇪🇸 🇮🇹 🇵🇹 🇬🇷 🇷🇺 🇺🇦 🇨🇳 🇹🇼 🇯🇵 🇰🇷 🇸🇦 🇮🇱 🇮🇳 🇹🇭 🇧🇷 🇺🇸 🇬🇧 🇪🇺 🏳️‍🌈 🏴‍☠️ 🏁. Keycaps: 1️⃣ 2️⃣ 3️⃣ #️⃣ *️⃣ 🔟. Weather: 🌧️ ⛈️ 🌩️ 🌨️ ❄️ 🌪️ 🌫️ 🌈 🌊.

Chat log:
anna: did the deploy go out? 🤔
ben: yes!! 🚀🚀🚀 all green ✅
anna: nice 😎 but the dashboard says 502 ❌
ben: oh no 😱 rolling back ⏪
anna: 😂😂😂 classic friday
ben: 🙈 it's fixed now, I promise 🤞

# Numbers

Small: 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 25 30 42 50 64 99 100.
Powers of two: 2 4 8 16 32 64 128 256 512 1024 2048 4096 8192 16384 32768 65536 131072 262144 524288 1048576 4294967296 18446744073709551616.
Years: 1066 1492 1789 1848 1914 1945 1969 1989 2000 2001 2008 2020 2024 2025 2038.
Decimals: 0.5 0.25 0.125 1.5 2.71828 3.14159265358979 6.02214076e23 1.602e-19 9.81 299792458 0.000001 -40 -273.15 +12.5.
Money: $5 $19.99 €1.234,56 £7.50 ¥1200 ₹499 ₩50,000 CHF 12.90 1,000,000.00 USD.
Percentages: 3% 12.5% 50% 99.9% 100% 0.01%.
Phone and codes: +49 30 1234567, (555) 010-9999, ISBN 978-3-16-148410-0, ZIP 94103, ID 00042, PIN 7315.
Times: 00:00 06:30 12:00 18:45 23:59:59.999, durations 1h30m, 45s, 250ms, 3d 4h.
Versions: v1 v1.2 v1.2.3 v10.0.19045 2.0.0-rc.1 3.11.4 0.9.8b.
Hex and binary: 0x0 0xFF 0x7FFF 0xDEADBEEF 0b1010 0o755 #ff8800 #1e90ff.
Ordinals and fractions: 1st 2nd 3rd 4th 21st 102nd ½ ¼ ¾ ⅓ 1/2 3/4 22/7.
Roman: Ⅰ Ⅱ Ⅲ Ⅳ Ⅴ Ⅹ; circled: ① ② ③; full width: ０１２３４５６７８９; superscript: x² y³ 10⁻⁶.
A long one: 31415926535897932384626433832795028841971693993751058209749445923078164062862089986280348253421170679.
)K3";

// C++, Python, JSON, shell and URLs.
constexpr std::string_view kCode = R"K3(
# Code: C++

```cpp
#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace weather {

// One reading from a station; units are SI.
struct Reading {
  int64_t unix_seconds = 0;
  double temperature_c = 0.0;
  double pressure_hpa = 0.0;
  double wind_ms = 0.0;
};

class Station {
 public:
  explicit Station(std::string id) : id_(std::move(id)) {}

  void add(const Reading& r) {
    if (!readings_.empty() && r.unix_seconds <= readings_.back().unix_seconds) {
      ++out_of_order_;
      return;
    }
    readings_.push_back(r);
  }

  // Mean temperature over [from, to), or NaN when there is no reading.
  double mean_temperature(int64_t from, int64_t to) const {
    double sum = 0.0;
    size_t n = 0;
    for (const Reading& r : readings_) {
      if (r.unix_seconds >= from && r.unix_seconds < to) {
        sum += r.temperature_c;
        ++n;
      }
    }
    return n == 0 ? std::numeric_limits<double>::quiet_NaN() : sum / static_cast<double>(n);
  }

  const std::string& id() const { return id_; }
  size_t size() const { return readings_.size(); }
  size_t out_of_order() const { return out_of_order_; }

 private:
  std::string id_;
  std::vector<Reading> readings_;
  size_t out_of_order_ = 0;
};

}  // namespace weather

int main(int argc, char** argv) {
  weather::Station hp("HP-07");
  for (int i = 0; i < 144; ++i) {
    hp.add({1700000000 + i * 600, 8.0 + 0.01 * i, 1002.7, 14.2});
  }
  std::printf("%s: %zu readings, mean %.2f C\n", hp.id().c_str(), hp.size(),
              hp.mean_temperature(1700000000, 1700086400));
  return 0;
}
```

# Code: Python

```python
import json
import math
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Reading:
    time: int
    temperature: float
    pressure: float
    wind: float = 0.0


@dataclass
class Station:
    station_id: str
    readings: list[Reading] = field(default_factory=list)

    def add(self, reading: Reading) -> bool:
        if self.readings and reading.time <= self.readings[-1].time:
            return False
        self.readings.append(reading)
        return True

    def mean_temperature(self, start: int, end: int) -> float:
        values = [r.temperature for r in self.readings if start <= r.time < end]
        if not values:
            return math.nan
        return sum(values) / len(values)


def load(path: Path) -> Station:
    data = json.loads(path.read_text(encoding="utf-8"))
    station = Station(data["id"])
    for row in data["readings"]:
        station.add(Reading(row["t"], row["temp"], row["p"], row.get("wind", 0.0)))
    return station


if __name__ == "__main__":
    s = load(Path("hp07.json"))
    print(f"{s.station_id}: {len(s.readings)} readings, mean {s.mean_temperature(0, 2**31):.2f} C")
    for i, r in enumerate(s.readings[:3]):
        print(i, r)
```

# Code: JSON

```json
{
  "id": "HP-07",
  "name": "Harrow Point",
  "location": {"lat": 57.1234, "lon": -6.5432, "elevation_m": 41},
  "active": true,
  "since": "1931-06-01",
  "sensors": ["temperature", "humidity", "pressure", "wind", "rain", "waves"],
  "readings": [
    {"t": 1700000000, "temp": 8.4, "p": 1002.7, "wind": 14.2},
    {"t": 1700000600, "temp": 8.3, "p": 1002.5, "wind": 15.0},
    {"t": 1700001200, "temp": 8.1, "p": 1002.1, "wind": null}
  ],
  "notes": "Gulls on the roof again. \"Fog so thick\" \u2014 see page 212.",
  "keepers": [{"name": "Agnes Moor", "from": 1931, "to": 1940}, {"name": "E.K. & J.K.", "from": 1947, "to": 1969}]
}
```

# Shell and URLs

```sh
$ curl -s "https://api.example.com/v1/stations/HP-07/readings?from=2024-01-01&to=2024-02-01&format=json" | jq '.readings | length'
4464
$ ls -la /var/lib/weather/
drwxr-xr-x  4 weather weather 4096 Mar 14 07:15 .
-rw-r--r--  1 weather weather 61234567 Mar 14 07:10 archive.csv.gz
$ grep -c "HP-07" archive.csv && echo "done" || echo "failed: $?"
$ export PATH="$HOME/.local/bin:$PATH"; cd ~/src/weather && git log --oneline -3
```

Links: https://www.example.com/ http://localhost:8080/health https://example.org/docs/getting-started#install ftp://files.example.net/pub/data.tar.gz https://en.example.org/wiki/Weather_station mailto:someone@example.com https://github.example/org/repo/blob/main/src/main.cpp#L42 https://example.com/search?q=%E4%B8%AD%E6%96%87&lang=zh-CN
)K3";

// Tab-indented text (a Makefile, Go, TSV): escapes, as raw literals keep tabs poorly.
constexpr std::string_view kTabs =
    "\n"
    "# Tabs: a Makefile, Go and a TSV table\n"
    "\n"
    "CXX ?= g++\n"
    "CXXFLAGS := -O2 -Wall -std=c++20\n"
    "\n"
    "all: station\n"
    "\n"
    "station: main.o station.o\n"
    "\t$(CXX) $(CXXFLAGS) -o $@ $^\n"
    "\n"
    "%.o: %.cpp\n"
    "\t$(CXX) $(CXXFLAGS) -c $< -o $@\n"
    "\n"
    "clean:\n"
    "\trm -f *.o station\n"
    "\n"
    "package main\n"
    "\n"
    "import (\n"
    "\t\"fmt\"\n"
    "\t\"os\"\n"
    ")\n"
    "\n"
    "func main() {\n"
    "\tif len(os.Args) < 2 {\n"
    "\t\tfmt.Fprintln(os.Stderr, \"usage: station FILE\")\n"
    "\t\tos.Exit(2)\n"
    "\t}\n"
    "\tfor i, arg := range os.Args[1:] {\n"
    "\t\tfmt.Printf(\"%d\\t%s\\n\", i, arg)\n"
    "\t}\n"
    "}\n"
    "\n"
    "station\tdate\ttemp_c\tpressure_hpa\twind_ms\n"
    "HP-07\t2024-03-14\t6.8\t1011.2\t7.4\n"
    "HP-07\t2024-03-15\t7.1\t1008.9\t9.8\n"
    "HP-08\t2024-03-14\t5.2\t1012.0\t4.1\n";

// CRLF line ends (a CSV export and a mail header): escapes, as raw literals cannot hold CR.
constexpr std::string_view kCrlf =
    "\n"
    "# CRLF: a Windows CSV export and a mail header\r\n"
    "Station,Date,Min,Max,Rain (mm),Comment\r\n"
    "HP-07,2024-01-01,2.1,7.9,4.5,\"Windy, some showers\"\r\n"
    "HP-07,2024-01-02,1.4,6.2,0.0,Clear\r\n"
    "HP-07,2024-01-03,-0.8,4.0,12.7,\"Storm; link down 19h\"\r\n"
    "HP-07,2024-01-04,0.3,5.5,1.1,\r\n"
    "From: records@harrow-point.example.org\r\n"
    "To: keepers@harrow-point.example.org\r\n"
    "Subject: Re: Battery 3 (serial 0047-B)\r\n"
    "Date: Thu, 14 Mar 2024 07:42:10 +0000\r\n"
    "Content-Type: text/plain; charset=utf-8\r\n"
    "\r\n"
    "Thanks, I'VE ordered two more. They'll arrive on Monday.\r\n"
    "It's the third one this winter; we'd better check the charger too.\r\n";

// English: an essay, a dialogue full of contractions in both cases, a recipe.
constexpr std::string_view kEnglishEssay = R"K3(
# On Learning a Language Late

I started learning my third language when I was forty-one, which everyone told me was too late. It wasn't. It was slower, and more embarrassing, and it required a kind of patience I didn't know I had, but it wasn't too late. If you're thinking about doing the same thing, here is what I wish somebody had told me.

First, you'll sound ridiculous for a long time, and that's fine. Children sound ridiculous too; they just don't care. The difference between a child and an adult learner isn't the brain, it's the fear. Adults hate being bad at things in public. I spent my first three months whispering to shopkeepers and pointing at bread. Then one day I asked for "a kilo of patience" instead of "a kilo of potatoes", the woman behind the counter laughed so hard she had to sit down, and after that I stopped being afraid. She still calls me the patience man.

Second, listen far more than you speak. I listened to the radio every morning while I made breakfast, not trying to understand, just letting the sounds wash over me. After a few weeks I started to hear where the words ended. After a few months I started to hear the jokes. The first time I laughed at a joke on the radio before I'd translated it in my head, I felt like I'd crossed a border.

Third, learn the small words. Not "democracy" or "photosynthesis", which are usually the same in every language anyway, but "actually", "anyway", "well", "so", "by the way", "never mind". Those are the words that hold a conversation together. If you know them, people will think you're more fluent than you are, and they'll keep talking to you, and you'll learn more.

Fourth, don't translate your personality. In my own language I'm fairly quiet. In my new one I'm louder, because I have to be: I speak slowly and with mistakes, and if I'm quiet as well, nobody waits for me to finish. At first this felt like wearing somebody else's coat. Now I think of it as a second coat that's simply mine.

Fifth, expect plateaus. You'll improve quickly, then not at all for months, then suddenly again. The months of nothing aren't wasted; that's when the new words are settling in. I kept a diary in the new language, one paragraph a day, and when I read the first pages a year later I couldn't believe how bad they were. That's the only reliable way I know to see progress: keep the evidence.

And finally, be kind to the people who help you. Every person who slowed down, repeated a sentence, or corrected my grammar without making me feel stupid gave me something valuable. I try to do the same now for people learning my language. When somebody says "I am having twenty years" instead of "I'm twenty", I don't laugh. Well, not out loud.

# Dialogue at the Bus Stop

"You're late." "I'm not late. The bus is late. There's a difference." "Is there?" "Yes. If I'm late, it's my fault. If the bus is late, it's the city's fault." "And whose fault is it that you're standing here without an umbrella?" "That's the weather's fault." "YOU'RE IMPOSSIBLE." "I'VE BEEN TOLD." "We'd better run; it'll start raining any minute." "She'd said it wouldn't rain until noon." "She'd also said the bus would come at 8:05." "FAIR POINT. LET'S GO." "They're closing the road at nine anyway, so we'll walk." "WE'LL WALK? IT'S FOUR KILOMETRES!" "It's 3.7. I checked." "Of course you did."

# A Recipe, Roughly

For four people you'll need: 500 g of flour, 2 eggs, 300 ml of milk, a pinch of salt, 50 g of butter, and whatever you'd like to put on top. Mix the flour and salt, make a well in the middle, crack in the eggs, and add the milk slowly while stirring, so that it doesn't go lumpy. Let the batter rest for 30 minutes. Heat a pan until it's properly hot, add a little butter, pour in a ladle of batter and tilt the pan so it spreads thin. Cook for about a minute, flip, cook for another 30 seconds. The first one is always bad; that's the cook's. Don't tell anyone.
)K3";

// Mixed scripts in one line, code-switching, more prose in several scripts.
constexpr std::string_view kMixed = R"K3(
# Mixed scripts and code-switching

我今天用Python写了一个小script，用来统计气象站的数据，一共处理了52560行，只用了0.8秒。明天打算改成C++版本，看看能不能更快。
東京の天気は晴れ、最高気温は23度です。Tomorrow it'll rain, so bring an umbrella ☂️。明日は雨なので、傘を持って行きましょう。
Der Zug nach München fährt um 14:32 von Gleis 7 ab – bitte beachten Sie die geänderte Wagenreihung. Le train pour Paris-Gare-de-Lyon part à 15h10, voie B. El tren a Madrid-Atocha sale a las 16:45.
서울의 인구는 약 940만 명입니다. The population of Seoul is about 9.4 million. ソウルの人口は約940万人です。首尔的人口约为940万。
Москва — столица России; Athens (Αθήνα) is the capital of Greece; القاهرة عاصمة مصر; ירושלים; नई दिल्ली भारत की राजधानी है; กรุงเทพมหานคร.
Unicode is fun: naïve café résumé coöperate façade Ångström Øresund Łódź Škoda İstanbul ıi ſ ß ẞ ﬁ ﬂ Æsir Þór ğ ş ț ă.

# 中文：编程小记

今天调试了一个很奇怪的问题。程序在我的电脑上运行正常，但是在服务器上每隔大约三个小时就会崩溃一次。日志里只有一行：“内存不足”。我先怀疑是内存泄漏，用工具检查了两遍，什么也没发现。后来同事提醒我，服务器上的时区和我的电脑不一样。原来，程序里有一个定时任务，按本地时间每天凌晨执行，但是时间计算写错了，在服务器的时区下会不停地重复创建任务，最后把内存占满。

改完以后，我在代码里加了一条注释：“所有时间一律使用UTC”。然后又加了一个测试，专门在不同的时区下运行。这件事告诉我，很多看起来很复杂的问题，原因其实很简单，只是藏在我们没有想到的地方。

# 日本語：プログラミングの勉強

最近、娘がプログラミングの勉強を始めました。最初はゲームを作りたいと言っていましたが、今はロボットを動かすことに夢中です。小さな車輪のついたロボットに、前に進む、右に曲がる、止まる、という命令を順番に書いて、机の上の迷路を走らせます。

うまくいかないとき、娘はすぐに「ロボットが悪い」と言います。でも、一緒にプログラムを一行ずつ読んでいくと、たいていは自分の命令が間違っていることに気がつきます。「ロボットは言われた通りにしか動かないんだね」と娘が言ったとき、私は少し感動しました。それは、プログラミングで一番大切なことの一つだと思います。

# Русский: заметки программиста

Сегодня я снова убедился, что самые коварные ошибки прячутся в самых простых местах. Функция, которая складывала два числа, иногда возвращала неверный результат. Оказалось, что одно из чисел приходило в виде строки «1 000», с пробелом между тысячами, и парсер молча отбрасывал всё после пробела. Исправление заняло одну строчку, а поиск — два дня.

# Ελληνικά και Español: proverbios

«Σιγά σιγά γίνεται η αγουρίδα μέλι» — poco a poco, la uva verde se convierte en miel. «Ἓν οἶδα ὅτι οὐδὲν οἶδα». No por mucho madrugar amanece más temprano. Más vale tarde que nunca.

# Final words

That's the end of the corpus. It's short, it's uneven, and it's ours. IT'S ALSO FREE TO USE FOR ANY PURPOSE. If you've read this far, thank you, and goodbye: auf Wiedersehen, au revoir, adiós, до свидания, αντίο, 再见, 再見, さようなら, 안녕히 가세요, مع السلامة, להתראות, अलविदा, ลาก่อน 👋
)K3";

constexpr std::string_view kParts[] = {
    kEnglishWeatherStation,
    kEnglishEngineeringNotes,
    kEuropean,
    kCyrillicGreek,
    kCjk,
    kRtlIndicThai,
    kEmojiNumbers,
    kCode,
    kTabs,
    kCrlf,
    kEnglishEssay,
    kMixed,
};

}  // namespace

std::string_view embedded_corpus() {
  static const std::string* const corpus = [] {
    auto* text = new std::string;
    for (std::string_view part : kParts) text->append(part);
    return text;
  }();
  return *corpus;
}

}  // namespace k3::tools
